"""Source throughput in Spark: AvailableNow into ``noop`` against a raw boto3 GetRecords loop, same records.

Run: ``.venv/bin/python -m bench.source_throughput [--records 200000] [--size 1024] [--per-batch 50000]``.

A 4-shard kinesalite stream is pre-loaded with ``--records`` records of ``--size`` bytes. In the same run:
- baseline: a boto3 loop reading every shard from TRIM_HORIZON to the tip (GetRecords Limit 10,000), one
  thread, keeping each record's data (botocore parses every answer);
- ours: ``spark.readStream.format("aws-kinesis")`` with ``Trigger.AvailableNow`` and
  ``kinesis.maxRecordsPerTrigger=--per-batch`` into the ``noop`` sink on local[2]. Spark's start-up
  (``getOrCreate``) is reported on its own; the query's wall time includes its first batch (Python workers
  start); the steady state is the rows/s of the batches after the first (from the query progress).
Printed: seconds, records/s and the ratio to the baseline (target >= 1.0 for the steady state). Nothing here is
asserted.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from bench.common import boto3_loop, options, preloaded_stream, spark_session
from localaws import LocalAws
from localaws.servers import KINESALITE

SHARDS = 4


def available_now(spark, opts: dict[str, str]) -> tuple[float, list[dict]]:
    """Wall seconds of one AvailableNow query into noop, and its progress reports."""
    with tempfile.TemporaryDirectory() as checkpoint:
        started = time.perf_counter()
        query = (
            spark.readStream.format("aws-kinesis")
            .options(**opts)
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        wall = time.perf_counter() - started
        assert query.exception() is None, query.exception()
        return wall, [dict(progress) for progress in query.recentProgress]


def row(name: str, records: int, seconds: float, baseline_s: float) -> str:
    return (
        f"| {name:<52} | {records:>9,} | {seconds:8.2f} | {records / seconds:>10,.0f} | {baseline_s / seconds:6.2f} |"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--per-batch", type=int, default=50_000)
    args = parser.parse_args(argv)
    with LocalAws([KINESALITE]) as aws:
        server = aws.kinesalite
        kinesis = server.client("kinesis")
        stream = preloaded_stream(kinesis, "bench-throughput", SHARDS, args.records, args.size)

        started = time.perf_counter()
        assert boto3_loop(kinesis, stream) == args.records
        baseline_s = time.perf_counter() - started

        started = time.perf_counter()
        spark = spark_session()
        startup_s = time.perf_counter() - started
        with tempfile.TemporaryDirectory() as metadata:
            opts = options(server, stream, metadata) | {"kinesis.maxrecordspertrigger": str(args.per_batch)}
            wall_s, progress = available_now(spark, opts)
        spark.stop()
    rows = [p["numInputRows"] for p in progress]
    assert sum(rows) == args.records, rows
    steady = progress[1:] or progress
    steady_rows = sum(p["numInputRows"] for p in steady)
    steady_s = sum(p["durationMs"]["triggerExecution"] for p in steady) / 1000
    print(f"{args.records:,} records x {args.size} B in {SHARDS} kinesalite shards; Spark local[2]; ")
    print(f"{len(progress)} micro-batches of up to {args.per_batch:,}; Spark start-up {startup_s:.1f} s (not included)")
    print(f"| {'run':<52} | {'records':>9} | {'seconds':>8} | {'records/s':>10} | {'ratio':>6} |")
    print(f"|{'-' * 54}|{'-' * 11}|{'-' * 10}|{'-' * 12}|{'-' * 8}|  (ratio = our records/s / the baseline's)")
    print("batches (rows, ms):", [(p["numInputRows"], p["durationMs"]["triggerExecution"]) for p in progress])
    print(row("boto3 GetRecords loop, 1 thread (baseline)", args.records, baseline_s, baseline_s))
    print(row("aws-kinesis AvailableNow -> noop, whole query", args.records, wall_s, baseline_s))
    steady_baseline_s = baseline_s * steady_rows / args.records  # the baseline's time for as many records
    print(row("aws-kinesis, steady state (batches after the first)", steady_rows, steady_s, steady_baseline_s))


if __name__ == "__main__":
    main()
