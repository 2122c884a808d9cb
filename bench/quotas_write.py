"""Writing at the shard's limit: our sink's and the generator's write rate per shard against the PutRecords quota,
beside a plain boto3 loop, in one run.

Run: ``.venv/bin/python -m bench.quotas_write [--shards N] [--seconds S] [--row-bytes B]`` (always behind
``localaws.quota_proxy`` with AWS's limits: 1,000 records/s and 1 MiB/s per shard; the quota is what is measured).
About a minute and a half on the 2-core machine with the defaults.

Two modes, three writers each, every writer into a stream of its own with ``--shards`` shards, each given
``--seconds`` seconds of the streams' quota:
- **plain** (one Kinesis record per row, ``--row-bytes`` rows): the limit is 1,000 records/s per shard;
- **aggregated** (KPL aggregates): the limit is 1 MiB/s per shard.
Writers: ``boto3 loop`` (PutRecords of 500 entries, or of the same aggregates our planner makes, sending the refused
entries again after 100 ms: what a user writes by hand), ``sink`` (``df.write.format("aws-kinesis")``, local[2], the
default options, ``kinesis.sink.aggregationEnabled`` as the mode says; the rows in 2 tasks, which share every
shard, and in 1) and ``generator`` (``kinesis_generator.run`` asked for 1.5 times what the stream takes, for
``--seconds``).

Per shard, from the proxy's per-second counts: the mean rate over the whole seconds between the first and the last
second that moved a tenth of the limit (those two left out: they are partly spent before and after), its share of
the limit, and the refused share of the entries offered (refused / (stored + refused)). Printed, never asserted
(tests/connector/queries/test_sink_quotas.py and tests/generator/test_quotas.py assert the counts).
"""

from __future__ import annotations

import argparse
import os
import time

from bench.common import Server, spark_session
from kinesis_generator import run as generate
from localaws import LocalAws
from localaws.quota_model import MiB
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY, KINESALITE
from localaws.streams import create_stream, unique_name
from pyspark_aws_kinesis.sink.planning import plan_aggregated
from pyspark_aws_kinesis.sink.routing import open_shard_router
from pyspark_aws_kinesis.sink.settings import sink_settings

RECORDS_LIMIT = 1000  # PutRecords records per second per shard (AWS)
BYTES_LIMIT = MiB  # PutRecords bytes per second per shard (AWS)
BATCH = 500


def rows(count: int, size: int) -> tuple[list[bytes], list[str]]:
    """``count`` rows of ``size`` bytes under 1,000 partition keys."""
    return [f"{i:010d}".encode().ljust(size, b"x") for i in range(count)], [f"key-{i % 1000}" for i in range(count)]


def boto3_loop(kinesis, stream: str, entries: list[dict]) -> None:
    """The baseline: PutRecords of up to 500 entries / 5 MiB, refused entries sent again after 100 ms."""
    start = 0
    while start < len(entries):
        batch, size = [], 0
        while start < len(entries) and len(batch) < BATCH and size + len(entries[start]["Data"]) <= 5 * MiB:
            size += len(entries[start]["Data"])
            batch.append(entries[start])
            start += 1
        while batch:
            answer = kinesis.put_records(StreamName=stream, Records=batch)
            batch = [entry for entry, result in zip(batch, answer["Records"], strict=True) if "ErrorCode" in result]
            if batch:
                time.sleep(0.1)


def aggregates(server: Server, stream: str, data: list[bytes], keys: list[str]) -> list[dict]:
    """The aggregates our sink's planner makes of these rows for this stream's shards (the baseline sends them)."""
    options = {"kinesis.streamName": stream, "kinesis.endpointUrl": server.direct.endpoint_url}
    options |= {"kinesis.awsAccessKeyId": DUMMY_ACCESS_KEY, "kinesis.awsSecretKey": DUMMY_SECRET_KEY}
    settings = sink_settings(options)
    router = open_shard_router(server.direct.client("kinesis"), stream, settings)
    planned = plan_aggregated(data, keys, [None] * len(data), router, 1)
    return [{"Data": e.data, "PartitionKey": e.partition_key} for lane in planned.lanes for e in lane]


def sink(spark, server: Server, stream: str, data: list[bytes], keys: list[str], aggregation: bool, tasks: int) -> None:
    frame = spark.createDataFrame(list(zip(data, keys, strict=True)), "data binary, partitionKey string")
    (
        frame.repartition(tasks)
        .write.format("aws-kinesis")
        .option("kinesis.streamName", stream)
        .option("kinesis.endpointUrl", server.endpoint_url)
        .option("kinesis.awsAccessKeyId", DUMMY_ACCESS_KEY)
        .option("kinesis.awsSecretKey", DUMMY_SECRET_KEY)
        .option("kinesis.sink.aggregationEnabled", str(aggregation).lower())
        .mode("append")
        .save()
    )


def per_shard(server: Server, stream: str, aggregated: bool) -> list[str]:
    """One line per shard: mean rate while writing, share of the limit, refused share."""
    report = server.quota_proxy.report()
    limit = BYTES_LIMIT if aggregated else RECORDS_LIMIT
    lines = []
    for shard in sorted(report.by("shard", stream=stream, action="PutRecords")):
        series = report.per_second(stream=stream, action="PutRecords", shard=shard)
        moved = [tally.bytes if aggregated else tally.records for tally in series]
        busy = [second for second, amount in enumerate(moved) if amount >= limit / 10]
        span = moved[busy[0] : busy[-1] + 1] if busy else [0]
        span = span[1:-1] if len(span) > 2 else span
        mean = sum(span) / len(span)
        total = report.tally(stream=stream, action="PutRecords", shard=shard)
        rate = f"{mean / MiB:6.2f} MiB/s" if aggregated else f"{mean:6.0f} rec/s"
        lines.append(
            f"    {shard}: {rate} = {mean / limit:4.0%} of the limit over {len(span)} s; refused "
            f"{total.refused_records:,} of {total.records + total.refused_records:,} entries offered "
            f"({total.refused_record_share:.1%})"
        )
    return lines


def mode(spark, server: Server, args: argparse.Namespace, aggregated: bool) -> list[str]:
    per_s = args.shards * (BYTES_LIMIT // args.row_bytes if aggregated else RECORDS_LIMIT)
    data, keys = rows(int(per_s * args.seconds), args.row_bytes)
    setup = server.direct.client("kinesis")
    name = "aggregated" if aggregated else "plain"
    lines = [f"{name}: {len(data):,} rows of {args.row_bytes} B, {args.seconds:.0f} s of {args.shards} shards' quota"]
    writers = {
        "boto3 loop": lambda stream: boto3_loop(
            server.client("kinesis"),
            stream,
            aggregates(server, stream, data, keys)
            if aggregated
            else [{"Data": d, "PartitionKey": k} for d, k in zip(data, keys, strict=True)],
        ),
        "sink, 2 tasks": lambda stream: sink(spark, server, stream, data, keys, aggregated, 2),
        "sink, 1 task": lambda stream: sink(spark, server, stream, data, keys, aggregated, 1),
        "generator": lambda stream: generate(
            stream,
            template='{"n": {{random.number(1000000000)}}, "pad": "' + "x" * (args.row_bytes - 30) + '"}',
            rate=per_s * 1.5,
            duration_s=args.seconds,
            endpoint_url=server.endpoint_url,
            aggregate=aggregated,
        ),
    }
    for writer, write in writers.items():
        stream = create_stream(setup, unique_name(f"bench-w-{name[:4]}"), args.shards)
        started = time.monotonic()
        write(stream)
        lines.append(f"  {writer} ({time.monotonic() - started:.1f} s):")
        lines += per_shard(server, stream, aggregated)
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds of the quota each writer is given")
    parser.add_argument("--row-bytes", type=int, default=1000)
    args = parser.parse_args(argv)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", DUMMY_ACCESS_KEY)
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", DUMMY_SECRET_KEY)
    with LocalAws([KINESALITE], quotas=True) as aws:
        server = aws.kinesalite
        spark = spark_session()
        lines = mode(spark, server, args, aggregated=False) + mode(spark, server, args, aggregated=True)
        spark.stop()
        print("kinesalite behind the quota proxy (AWS's limits); Spark local[2]; the connector's default options")
        print("\n".join(lines))
        print(aws.quota_summary())


if __name__ == "__main__":
    main()
