"""parallel: the driver's pools run at most ``workers`` calls at once (``kinesis.checkNewRecordThreads`` sizes the
prober's), and the planner's prober gets the option's value."""

from __future__ import annotations

import threading
import time

import pytest

from localaws import LocalServer
from pyspark_aws_kinesis import parallel
from pyspark_aws_kinesis.parallel import WORKERS, parallel_map
from tests.connector.support.source_util import reader, source_options


def test_parallel_map_runs_at_most_workers_calls_at_once() -> None:
    workers, running, peak = 3, [0], [0]
    lock, release = threading.Lock(), threading.Event()

    def call(item: int) -> int:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        release.wait(30)
        with lock:
            running[0] -= 1
        return item * 2

    results: list[int] = []
    mapper = threading.Thread(target=lambda: results.extend(parallel_map(call, range(9), workers)))
    mapper.start()
    deadline = time.monotonic() + 30
    while peak[0] < workers and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)  # room for calls beyond `workers` to start, if the pool were larger
    assert peak[0] == workers
    release.set()
    mapper.join(30)
    assert results == [item * 2 for item in range(9)]


def test_parallel_map_hands_its_pool_one_task_per_thread_not_per_item(monkeypatch: pytest.MonkeyPatch) -> None:
    # one per item made the caller wait for the pool's lock behind threads already calling (docs/source.md)
    submitted: list[object] = []
    real_pool = parallel._pool

    class CountingPool:
        def __init__(self, pool):
            self.pool = pool

        def submit(self, fn, *args):
            submitted.append(fn)
            return self.pool.submit(fn, *args)

    monkeypatch.setattr(parallel, "_pool", lambda workers: CountingPool(real_pool(workers)))
    assert parallel_map(lambda item: item + 1, range(100), 4) == list(range(1, 101))
    assert len(submitted) == 4


def test_parallel_map_raises_the_error_once_its_threads_stopped_and_starts_no_new_item() -> None:
    started: list[int] = []
    lock = threading.Lock()

    def call(item: int) -> int:
        with lock:
            started.append(item)
        if item == 0:
            raise ValueError("item 0")
        time.sleep(0.05)
        return item

    with pytest.raises(ValueError, match="item 0"):
        parallel_map(call, range(100), 2)
    count = len(started)
    time.sleep(0.2)
    assert len(started) == count < 100  # nothing runs on after the raise; the rest was never started


def test_the_planners_prober_uses_check_new_record_threads(kinesalite: LocalServer, tmp_path) -> None:
    options = source_options(kinesalite, "s", tmp_path)
    assert reader(options).offsets.planner.prober.workers == WORKERS
    assert reader({**options, "kinesis.checkNewRecordThreads": "2"}).offsets.planner.prober.workers == 2
