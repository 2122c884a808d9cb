"""Source read throughput from kinesalite: our reader against a hand-written boto3 GetRecords loop, same records.

Run: ``.venv/bin/python -m bench.source_read [--records N] [--size BYTES] [--repeats N] [--no-quotas]`` (ours and
the baselines read through AWS's Kinesis quotas by default, ``bench.common``; the streams are filled directly).

Two tables, each printed with ratios (measured here, never asserted):
1. Plain records (default 40,000 x 1 KiB in 4 shards). Baseline: a boto3 loop reading every shard from
   TRIM_HORIZON to the tip (GetRecords Limit 10,000), keeping each record's data. Ours: the executor path
   (``KinesisStreamReader.partitions`` + ``read`` into Arrow RecordBatches, metadata recorded) in this process,
   and ``spark.read.format("aws-kinesis")`` into the ``noop`` sink on local[2] (Spark's job overhead included).
2. KPL aggregates (the same number of user records, 100 per aggregate). Baseline: the same boto3 loop plus
   aws-kinesis-agg's own deaggregator. Ours: the executor path, which de-aggregates with ``pyspark_aws_kinesis.kpl``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable

from aws_kinesis_agg.aggregator import RecordAggregator

from bench.common import (
    Server,
    add_quota_flag,
    boto3_loop,
    local_aws,
    options,
    preloaded_stream,
    print_quotas,
    spark_session,
)
from localaws.servers import KINESALITE
from localaws.streams import create_stream, unique_name

SHARDS = 4
PER_AGGREGATE = 100


def executor_path(server: Server, stream: str) -> int:
    """Our reader without Spark: plan one batch, read every partition, record the metadata."""
    from pyspark_aws_kinesis.source.stream_reader import KinesisStreamReader

    with tempfile.TemporaryDirectory() as metadata:
        reader = KinesisStreamReader(None, options(server, stream, metadata))  # type: ignore[arg-type]
        start = reader.initialOffset()
        end = reader.latestOffset(start, None)
        return sum(batch.num_rows for p in reader.partitions(start, end) for batch in reader.read(p))


def spark_batch_read(spark, server: Server, stream: str) -> None:
    frame = spark.read.format("aws-kinesis").options(**options(server, stream, tempfile.mkdtemp())).load()
    frame.write.format("noop").mode("overwrite").save()


def timed(repeats: int, run: Callable[[], object]) -> float:
    """Median seconds of ``repeats`` runs (the machine is shared: one run can be slowed by a neighbour)."""
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def row(name: str, records: int, seconds: float, baseline_s: float) -> str:
    return (
        f"| {name:<44} | {records:>9,} | {seconds:8.2f} | {records / seconds:>12,.0f} | {baseline_s / seconds:6.2f} |"
    )


def header(title: str) -> list[str]:
    return [
        f"\n{title}",
        f"| {'run':<44} | {'records':>9} | {'seconds':>8} | {'records/s':>12} | {'ratio':>6} |",
        f"|{'-' * 46}|{'-' * 11}|{'-' * 10}|{'-' * 14}|{'-' * 8}|  (ratio = baseline time / run time)",
    ]


def fill_aggregated(kinesis, stream: str, records: int, size: int) -> None:
    payload = os.urandom(size)
    outgoing = []
    aggregator = RecordAggregator()
    for i in range(records):
        # One partition key per aggregate: every sub-record hashes to the aggregate's shard (readers drop the
        # sub-records of an aggregate that belong to another shard, as the KCL does).
        aggregator.add_user_record(f"key-{i // PER_AGGREGATE}", payload, None)
        if aggregator.get_num_user_records() == PER_AGGREGATE:
            key, explicit, data = aggregator.clear_and_get().get_contents()
            outgoing.append({"Data": data, "PartitionKey": key, **({"ExplicitHashKey": explicit} if explicit else {})})
    per_call = 40  # 40 aggregates of 100 KiB stay under PutRecords' 5 MiB
    for start in range(0, len(outgoing), per_call):
        answer = kinesis.put_records(StreamName=stream, Records=outgoing[start : start + per_call])
        assert answer["FailedRecordCount"] == 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=40_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each case; the median is shown")
    add_quota_flag(parser)
    args = parser.parse_args(argv)
    with local_aws(args, KINESALITE) as aws:
        server = aws.kinesalite
        kinesis = server.client("kinesis")
        setup = server.direct.client("kinesis")
        plain = preloaded_stream(setup, "bench-source", SHARDS, args.records, args.size)
        aggregated = create_stream(setup, unique_name("bench-source-kpl"), SHARDS)
        fill_aggregated(setup, aggregated, args.records, min(args.size, 9000))

        assert boto3_loop(kinesis, plain) == executor_path(server, plain) == args.records
        baseline_s = timed(args.repeats, lambda: boto3_loop(kinesis, plain))
        ours_s = timed(args.repeats, lambda: executor_path(server, plain))
        spark = spark_session()
        spark_batch_read(spark, server, plain)  # start the Python workers outside the timing
        spark_s = timed(args.repeats, lambda: spark_batch_read(spark, server, plain))
        lines = header(f"1. {args.records:,} records x {args.size} B in {SHARDS} shards")
        lines += [
            row("boto3 GetRecords loop (baseline)", args.records, baseline_s, baseline_s),
            row("source executor path (Arrow batches)", args.records, ours_s, baseline_s),
            row("spark.read.format('aws-kinesis') -> noop", args.records, spark_s, baseline_s),
        ]
        users = (args.records // PER_AGGREGATE) * PER_AGGREGATE
        assert boto3_loop(kinesis, aggregated, deaggregate=True) == executor_path(server, aggregated) == users
        kpl_baseline_s = timed(args.repeats, lambda: boto3_loop(kinesis, aggregated, deaggregate=True))
        kpl_ours_s = timed(args.repeats, lambda: executor_path(server, aggregated))
        lines += header(f"2. {users:,} user records in KPL aggregates of {PER_AGGREGATE}")
        lines += [
            row("boto3 loop + aws-kinesis-agg deaggregate", users, kpl_baseline_s, kpl_baseline_s),
            row("source executor path (pyspark_aws_kinesis.kpl)", users, kpl_ours_s, kpl_baseline_s),
        ]
        print(f"median of {args.repeats} runs each; kinesalite on 127.0.0.1; Spark local[2]")
        print("\n".join(lines))
        spark.stop()
    print_quotas(aws)


if __name__ == "__main__":
    main()
