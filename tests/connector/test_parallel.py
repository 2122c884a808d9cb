"""parallel: the driver's pools run at most ``workers`` calls at once (``kinesis.checkNewRecordThreads`` sizes the
prober's), and the planner's prober gets the option's value."""

from __future__ import annotations

import threading
import time

from localaws import LocalServer
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


def test_the_planners_prober_uses_check_new_record_threads(kinesalite: LocalServer, tmp_path) -> None:
    options = source_options(kinesalite, "s", tmp_path)
    assert reader(options).offsets.planner.prober.workers == WORKERS
    assert reader({**options, "kinesis.checkNewRecordThreads": "2"}).offsets.planner.prober.workers == 2
