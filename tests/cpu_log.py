"""Where the suite's CPU goes: with KINESIS_TEST_CPU_LOG=FILE set, each test appends one JSON line to FILE: its id,
the xdist worker, the session's pyspark, its wall seconds and the CPU seconds of the pytest process and everything it
started (Spark's JVM and Python workers, the local servers, subprocesses), setup and teardown included, and of the
pytest process alone. What to read from it: docs/testing.md. ``python -m tests.cpu_log FILE`` sums it by file.

A process reparented away from the tree is not counted: a detached helper, or the JVM of a Spark app run as a
subprocess once the app has exited (pyspark does not wait for it). One that exits is counted once reaped, which
the forks of pyspark's daemons never are: the daemon ignores SIGCHLD, so the kernel reaps them for no parent.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import procfs

ENV = "KINESIS_TEST_CPU_LOG"


def tree_cpu_s(root: int) -> float:
    """CPU seconds of ``root`` and its live descendants, with what each of them has reaped."""
    stats = dict(procfs.stat_fields())
    return sum(procfs.cpu_s(stats[pid]) for pid in [root, *procfs.below(root, stats)] if pid in stats)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    path = os.environ.get(ENV)
    if not path:
        yield
        return
    cpu, wall, own = tree_cpu_s(os.getpid()), time.monotonic(), time.process_time()
    yield
    line = {
        "test": item.nodeid,
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "pyspark": _pyspark_version(),
        "wall_s": round(time.monotonic() - wall, 3),
        "cpu_s": round(tree_cpu_s(os.getpid()) - cpu, 3),
        "own_cpu_s": round(time.process_time() - own, 3),  # the pytest process alone (in-process proxies, clients)
    }
    with open(path, "a") as log:  # one short write a line: workers append side by side
        log.write(json.dumps(line) + "\n")


def _pyspark_version() -> str | None:
    """Which pyspark the session runs (the two legs of ``make test`` share the log), None before it is imported."""
    module = sys.modules.get("pyspark")
    return getattr(module, "__version__", None)


def by_file(lines: list[dict]) -> list[tuple[str, float, float]]:
    """(file, CPU s, wall s) summed over the log's tests, most CPU first."""
    cpu: Counter[str] = Counter()
    wall: Counter[str] = Counter()
    for line in lines:
        name = line["test"].split("::")[0]
        cpu[name] += line["cpu_s"]
        wall[name] += line["wall_s"]
    return [(name, cpu[name], wall[name]) for name, _ in cpu.most_common()]


def main(argv: list[str]) -> None:
    lines = [json.loads(text) for text in Path(argv[0]).read_text().splitlines() if text]
    rows = by_file(lines)
    print(f"{len(lines)} tests: {sum(r[1] for r in rows):.0f} CPU s in {sum(r[2] for r in rows):.0f} test s")
    for name, cpu, wall in rows[: int(argv[1]) if len(argv) > 1 else 30]:
        print(f"{cpu:8.1f} CPU s {wall:8.1f} s  {name}")


if __name__ == "__main__":
    main(sys.argv[1:])
