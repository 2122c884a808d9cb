"""Sink throughput into kinesalite: our ``aws-kinesis`` sink against a raw boto3 PutRecords loop, same records.

Run: ``.venv/bin/python -m bench.sink_throughput [--records N] [--size BYTES] [--small-records N] [--no-quotas]``.

Two tables, each printed with ratios (measured here, never asserted):
1. Same records (default 60,000 x 1 KiB), the baseline is a plain boto3 loop (500 entries per call, failed
   entries retried) in this process; ours is ``df.write.format("aws-kinesis")`` from a cached DataFrame on
   local[2], with aggregation off (one Kinesis record per row, like the baseline) and on (the default).
2. 100-byte records (default 200,000): aggregation on vs off, in records per second.

Spark's job overhead (~0.5 s per write) is inside our numbers; the baseline has none. By default both write
through AWS's Kinesis quotas (``bench.common``: 1,000 records/s and 1 MiB/s per shard); the baseline waits 100 ms
before sending its refused entries again.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench.common import Server, add_quota_flag, local_aws, print_quotas, spark_session
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY, KINESALITE
from localaws.streams import create_stream, unique_name

SHARDS = 4
BATCH = 500


def make_records(count: int, size: int, keys: int = 1000) -> pa.Table:
    """``count`` rows of ``size`` random-ish bytes under ``keys`` partition keys (the same rows for everyone)."""
    payload = os.urandom(size * 2)
    data = [payload[i % size : i % size + size] for i in range(count)]
    return pa.table({"data": pa.array(data, pa.binary()), "partitionKey": [f"key-{i % keys}" for i in range(count)]})


def boto3_loop(kinesis, stream: str, table: pa.Table) -> float:
    """The baseline: what a user writes by hand. Returns seconds."""
    data, keys = table["data"].to_pylist(), table["partitionKey"].to_pylist()
    started = time.perf_counter()
    for start in range(0, len(data), BATCH):
        pending = [
            {"Data": d, "PartitionKey": k}
            for d, k in zip(data[start : start + BATCH], keys[start : start + BATCH], strict=True)
        ]
        while pending:
            answer = kinesis.put_records(StreamName=stream, Records=pending)
            pending = [entry for entry, result in zip(pending, answer["Records"], strict=True) if "ErrorCode" in result]
            if pending:
                time.sleep(0.1)
    return time.perf_counter() - started


def sink_write(spark, server: Server, stream: str, path: Path, aggregation: bool, connections: int = 1) -> float:
    """Our sink from a cached DataFrame of the same rows. Returns seconds."""
    frame = spark.read.parquet(str(path)).repartition(2).cache()
    frame.count()  # materialize the cache outside the timing
    started = time.perf_counter()
    (
        frame.write.format("aws-kinesis")
        .option("kinesis.streamName", stream)
        .option("kinesis.endpointUrl", server.endpoint_url)
        .option("kinesis.region", "us-east-1")
        .option("kinesis.sink.aggregationEnabled", str(aggregation).lower())
        .option("kinesis.sink.maxConnections", str(connections))
        .mode("append")
        .save()
    )
    elapsed = time.perf_counter() - started
    frame.unpersist()
    return elapsed


def row(name: str, rows: int, seconds: float, baseline_s: float) -> str:
    return f"| {name:<40} | {rows:>9,} | {seconds:8.2f} | {rows / seconds:>12,.0f} | {baseline_s / seconds:6.2f} |"


def header(title: str, baseline: str) -> list[str]:
    return [
        f"\n{title}",
        f"| {'run':<40} | {'records':>9} | {'seconds':>8} | {'records/s':>12} | {'ratio':>6} |",
        f"|{'-' * 42}|{'-' * 11}|{'-' * 10}|{'-' * 14}|{'-' * 8}|  (ratio = {baseline} time / run time)",
    ]


def median_of(repeats: int, run) -> float:
    """Median seconds of ``repeats`` runs: the machine is shared, one run can be slowed by a neighbour."""
    return statistics.median(run() for _ in range(repeats))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=60_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--small-records", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each case; the median is shown")
    add_quota_flag(parser)
    args = parser.parse_args(argv)
    # The sink's tasks find credentials through the default chain; dummy ones for the local server.
    os.environ.setdefault("AWS_ACCESS_KEY_ID", DUMMY_ACCESS_KEY)
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", DUMMY_SECRET_KEY)
    with local_aws(args, KINESALITE) as aws, tempfile.TemporaryDirectory() as tmp:
        server = aws.kinesalite
        kinesis = server.client("kinesis")
        stream = create_stream(server.direct.client("kinesis"), unique_name("bench-sink"), SHARDS)
        spark = spark_session()
        same, small, warmup = Path(tmp) / "same.parquet", Path(tmp) / "small.parquet", Path(tmp) / "warmup.parquet"
        same_rows = make_records(args.records, args.size)
        pq.write_table(same_rows, same)
        pq.write_table(make_records(args.small_records, 100), small)
        pq.write_table(make_records(2000, 100), warmup)
        sink_write(spark, server, stream, warmup, aggregation=False)  # start the Python workers outside timing

        def sink(path: Path, aggregation: bool, connections: int = 1):
            return lambda: sink_write(spark, server, stream, path, aggregation, connections)

        baseline_s = median_of(args.repeats, lambda: boto3_loop(kinesis, stream, same_rows))
        plain_s = median_of(args.repeats, sink(same, aggregation=False))
        wide_s = median_of(args.repeats, sink(same, aggregation=False, connections=4))
        aggregated_s = median_of(args.repeats, sink(same, aggregation=True))
        lines = header(f"1. {args.records:,} records x {args.size} B into {SHARDS} shards", "boto3 loop")
        lines += [
            row("boto3 PutRecords loop (baseline)", args.records, baseline_s, baseline_s),
            row("sink, aggregation off", args.records, plain_s, baseline_s),
            row("sink, aggregation off, maxConnections 4", args.records, wide_s, baseline_s),
            row("sink, aggregation on (default)", args.records, aggregated_s, baseline_s),
        ]
        small_plain_s = median_of(args.repeats, sink(small, aggregation=False))
        small_aggregated_s = median_of(args.repeats, sink(small, aggregation=True))
        lines += header(f"2. {args.small_records:,} records x 100 B: aggregation on vs off", "aggregation-off")
        lines += [
            row("sink, aggregation off", args.small_records, small_plain_s, small_plain_s),
            row("sink, aggregation on", args.small_records, small_aggregated_s, small_plain_s),
        ]
        print(f"median of {args.repeats} runs each; Spark local[2]; kinesalite on 127.0.0.1")
        print("\n".join(lines))
        spark.stop()
    print_quotas(aws)


if __name__ == "__main__":
    main()
