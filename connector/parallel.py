"""One small thread pool per process for the driver's many small AWS calls (probes, metadata lookups).

Module-level, so it is never pickled with a reader; made on first use, so executors never start it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")
WORKERS = 8  # below a client's connection pool (10), so calls never wait for a connection

_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def parallel_map(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``[fn(item) for item in items]``, run on the pool when there is more than one item."""
    global _pool
    todo = list(items)
    if len(todo) <= 1:
        return [fn(item) for item in todo]
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="kinesis-driver")
    return list(_pool.map(fn, todo))
