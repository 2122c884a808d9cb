"""Small thread pools per process for the driver's many small AWS calls (probes, metadata lookups).

Module-level, so they are never pickled with a reader; made on first use, so executors never start one. One pool
per size: the prober's size is the ``kinesis.checkNewRecordThreads`` option, other callers use ``WORKERS``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")
WORKERS = 8  # below a client's connection pool (10), so calls never wait for a connection

_pools: dict[int, ThreadPoolExecutor] = {}
_lock = threading.Lock()


def parallel_map(fn: Callable[[T], R], items: Iterable[T], workers: int = WORKERS) -> list[R]:
    """``[fn(item) for item in items]``, at most ``workers`` at a time, on a pool when there is more than one item."""
    todo = list(items)
    if len(todo) <= 1:
        return [fn(item) for item in todo]
    with _lock:
        pool = _pools.get(workers)
        if pool is None:
            pool = _pools[workers] = ThreadPoolExecutor(workers, thread_name_prefix=f"kinesis-driver-{workers}")
    return list(pool.map(fn, todo))
