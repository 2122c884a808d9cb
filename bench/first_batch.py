"""Where a streaming query's first batch spends its time: timestamps logged from inside Spark's Python processes.

Who uses it: ``bench.source_throughput``. Not a benchmark itself.

- ``TimedKinesisSource`` (``format("aws-kinesis-timed")``): the connector's source unchanged, whose driver calls
  (``initialOffset``, ``latestOffset``, ``partitions``) and executor ``read()`` log one line each through
  ``bench.timing_log``: when the call started and ended, and for ``read()`` how long the connector's imports
  took in that process (pyarrow, botocore, connector), when the reader client was ready and when the
  first RecordBatch left. The log is the only addition: every row comes from the connector itself.
- ``worker_breakdown(lines, ...)``: the executor side of the log, as ``source_throughput`` prints it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

from bench.timing_log import log  # first: it stamps when this module started loading in the process


def _timed_import(name: str) -> float:
    """Seconds importing ``name`` took here (0 when it was already imported in this process)."""
    if name in sys.modules:
        return 0.0
    started = time.perf_counter()
    __import__(name)
    return time.perf_counter() - started


IMPORTS = {
    name: _timed_import(name) for name in ("pyarrow", "botocore.session", "pyspark_aws_kinesis.source.stream_reader")
}

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition  # noqa: E402

from pyspark_aws_kinesis.aws.clients import kinesis_reader_client  # noqa: E402
from pyspark_aws_kinesis.datasource import KinesisDataSource  # noqa: E402
from pyspark_aws_kinesis.source.stream_reader import KinesisStreamReader  # noqa: E402

_reads_here = 0  # read() calls so far in this process


class TimedKinesisReader(KinesisStreamReader):
    """The connector's reader; each call also logs when it ran (see the module doc)."""

    def initialOffset(self) -> dict[str, Any]:
        started = time.time()
        answer = super().initialOffset()
        log("initialOffset", started, imports=IMPORTS)
        return answer

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict[str, Any]:
        started = time.time()
        answer = super().latestOffset(start, limit)
        log("latestOffset", started, imports=IMPORTS)
        return answer

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        started = time.time()
        answer = super().partitions(start, end)
        log("partitions", started, count=len(answer), imports=IMPORTS)
        return answer

    def read(self, partition: InputPartition) -> Iterator[Any]:
        global _reads_here
        _reads_here += 1
        started = time.time()
        kinesis_reader_client(self.settings.client)  # made once per process: its cost shows here
        client_ready = time.time()
        first_batch, rows = None, 0
        for batch in super().read(partition):
            first_batch = first_batch or time.time()
            rows += batch.num_rows
            yield batch
        log(
            "read",
            started,
            client_ready=client_ready,
            first_batch=first_batch,
            rows=rows,
            nth=_reads_here,
            imports=IMPORTS,
        )


class TimedKinesisSource(KinesisDataSource):
    """``format("aws-kinesis-timed")``: the connector's source with ``TimedKinesisReader``."""

    @classmethod
    def name(cls) -> str:
        return "aws-kinesis-timed"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return TimedKinesisReader(schema, self.options)


def worker_breakdown(lines: list[dict[str, Any]], batch_started: float) -> dict[str, float]:
    """Seconds of the first batch's executor side, per process that ran a first read (max over processes).

    ``batch_started``: when the batch's planning ended (the last ``partitions`` call's end), epoch seconds.
    Parts: until the worker process was forked; pyspark's own start in it (fork -> this module's import);
    the connector's imports; until read() was called (reader unpickled, partition received); the client;
    until the first RecordBatch left; the rest of the read.
    """
    parts: dict[str, list[float]] = {}
    for line in lines:
        if line["event"] != "read" or line.get("nth") != 1:
            continue
        forked = max(line["process_started"], batch_started)  # a process started before: reused, no fork cost
        imports = sum(line["imports"].values())
        steps = {
            "planning end -> worker process forked": forked - batch_started,
            "worker: pyspark start (fork -> source module)": max(0.0, line["module_loaded"] - forked),
            "worker: imports (pyarrow, botocore, connector)": imports,
            "worker: until read() called": max(0.0, line["started"] - line["module_loaded"] - imports),
            "worker: Kinesis client built": line["client_ready"] - line["started"],
            "worker: until first RecordBatch": (line["first_batch"] or line["ended"]) - line["client_ready"],
            "worker: rest of the first read": line["ended"] - (line["first_batch"] or line["ended"]),
        }
        for name, seconds in steps.items():
            parts.setdefault(name, []).append(seconds)
    return {name: max(values) for name, values in parts.items()}


def driver_breakdown(lines: list[dict[str, Any]], query_started: float) -> dict[str, float]:
    """Seconds from ``start()`` (``query_started``, epoch) to the source's first driver call, in the driver's
    long-lived Python process that runs the reader (pyspark's streaming source runner)."""
    calls = [line for line in lines if line["event"] in ("initialOffset", "latestOffset", "partitions")]
    if not calls:
        return {}
    first = min(calls, key=lambda line: line["started"])
    imports = sum(first["imports"].values())
    return {
        "start() -> source runner process started": first["process_started"] - query_started,
        "runner: pyspark start (-> source module)": first["module_loaded"] - first["process_started"],
        "runner: imports (pyarrow, botocore, connector)": imports,
        "runner: until the first call (reader made)": first["started"] - first["module_loaded"] - imports,
    }
