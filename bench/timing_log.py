"""A light timing log for benchmarks, and an empty streaming source: Spark's floor for a Python source.

Who uses it: ``bench.first_batch`` (the timed Kinesis source) and ``bench.source_throughput`` (``--floor``). It
imports pyspark's data source API only, so that the empty source's workers pay Spark's own start and nothing of
the connector's.

- ``log(event, started, **fields)`` appends one JSON line to the file named by ``$BENCH_TIMING_LOG`` (unset:
  nothing), opened per call with ``O_APPEND`` (one ``write`` per line: processes do not interleave lines);
  each line says which process, when it started (``/proc``) and when this module was loaded in it.
- ``EmptySource`` (``format("bench-empty")``): one batch of ``partitions`` partitions whose ``read()`` returns
  nothing: Spark's own cost of a Python source's first batch (worker fork, pyspark's worker start, task
  scheduling, codegen).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

MODULE_LOADED = time.time()

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition  # noqa: E402

LOG_ENV = "BENCH_TIMING_LOG"


def process_started() -> float:
    """Epoch seconds this process started (forked), from /proc (Linux)."""
    ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
    boot = next(
        int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime")
    )
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def log(event: str, started: float, **fields: Any) -> None:
    """Append one line: ``event`` that started at ``started`` (epoch s) and ends now, with ``fields``."""
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    line = {
        "event": event,
        "pid": os.getpid(),
        "process_started": process_started(),
        "module_loaded": MODULE_LOADED,
        "started": started,
        "ended": time.time(),
        **fields,
    }
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


class _EmptyPartition(InputPartition):
    pass


class EmptyReader(DataSourceStreamReader):
    """One batch (offset 0 -> 1) of ``partitions`` partitions that read nothing."""

    def __init__(self, options: dict[str, str]):
        self.count = int(options.get("partitions", "4"))

    def initialOffset(self) -> dict:
        return {"batch": 0}

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        return {"batch": 1}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        return [_EmptyPartition(i) for i in range(self.count)] if start != end else []

    def read(self, partition: InputPartition) -> Iterator[Any]:
        log("read", time.time(), rows=0, nth=0)
        return iter(())


class EmptySource(DataSource):
    """``format("bench-empty")``: see ``EmptyReader``."""

    @classmethod
    def name(cls) -> str:
        return "bench-empty"

    def schema(self) -> str:
        return "value BINARY"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return EmptyReader(self.options)


def read_log(path: str) -> list[dict[str, Any]]:
    """Every line of a log written by ``log``."""
    with open(path) as lines:
        return [json.loads(line) for line in lines if line.strip()]
