"""Small thread pools per process for the driver's many small AWS calls (probes, metadata lookups).

Module-level, so they are never pickled with a reader; made on first use, so executors never start one. One pool
per size: the prober's size is the ``kinesis.checkNewRecordThreads`` option, other callers use ``WORKERS``.
"""

from __future__ import annotations

import queue
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
    """``[fn(item) for item in items]``, at most ``workers`` at a time, on a pool when there is more than one item.

    Each of the pool's threads takes the next item from a shared queue until none is left: one hand-over per
    thread, not per item. With one per item, the caller queued 1,000 probes one by one while the threads already
    called, waiting for the pool's lock behind them: a fifth of a 10,000-shard trigger (docs/source.md, "What the
    source costs a shard"). The first error is raised once every thread has stopped; after it, no new item starts.
    """
    todo = list(items)
    if len(todo) <= 1:
        return [fn(item) for item in todo]
    results: list[R | None] = [None] * len(todo)
    waiting: queue.SimpleQueue[int] = queue.SimpleQueue()
    for index in range(len(todo)):
        waiting.put(index)
    failed = threading.Event()

    def drain() -> None:
        while not failed.is_set():
            try:
                index = waiting.get_nowait()
            except queue.Empty:
                return
            try:
                results[index] = fn(todo[index])
            except BaseException:
                failed.set()
                raise

    pool = _pool(workers)
    handed = [pool.submit(drain) for _ in range(min(workers, len(todo)))]
    for future in handed:
        future.exception()  # wait for every thread before raising
    for future in handed:
        future.result()
    return results  # type: ignore[return-value]


def _pool(workers: int) -> ThreadPoolExecutor:
    with _lock:
        pool = _pools.get(workers)
        if pool is None:
            pool = _pools[workers] = ThreadPoolExecutor(workers, thread_name_prefix=f"kinesis-driver-{workers}")
        return pool
