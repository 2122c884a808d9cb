"""Enhanced fan-out against polling, same run, same stream: put -> row latency and read throughput (kinesis-mock).

Run: ``.venv/bin/python -m bench.efo_latency [--rate 100] [--seconds 20] [--records 5000] [--trigger-ms 200]
[--no-quotas]`` (by default kinesis-mock sits behind AWS's Kinesis quotas, ``bench.common``; the producer and the
setup write to it directly).

1. Latency: a producer puts ``--rate`` records/s (each carrying its put time) into a 1-shard kinesis-mock stream;
   two Structured Streaming queries read it at once into ``foreachBatch`` sinks that stamp each row: one with
   ``kinesis.consumerType=GetRecords`` (default options: 200 ms fetch interval), one with ``SubscribeToShard``.
2. Throughput: ``--records`` 1 KiB records in another 1-shard stream are read from TRIM_HORIZON to the tip by
   the connector's range reader (``fetch.range.ShardRange``, no Spark) once through each transport.

The EFO query reads through this host's subscription broker (``pyspark_aws_kinesis.fetch.fanout.broker``), which keeps
each shard's subscription open across micro-batches: without it every batch would resubscribe, and Kinesis (and
kinesis-mock) refuse a new SubscribeToShard on the same consumer and shard within 5 s of the previous one
(``AWS_KINESIS_EFO_BROKER=off`` measures that). The throughput part reads through the broker too. kinesis-mock pushes
events about once a second and its speed is not AWS's: only the ratios of this run mean anything, and even they are a
local server's. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from bench.common import Server, add_quota_flag, local_aws, options, print_quotas, spark_session
from bench.latency import percentiles, produce
from localaws.servers import KINESIS_MOCK
from localaws.streams import create_stream, list_shard_ids, put_records, unique_name
from pyspark_aws_kinesis.consumers import ensure_consumer
from pyspark_aws_kinesis.fetch.range import FetchLimits, ShardTask
from pyspark_aws_kinesis.positions import TRIM_HORIZON, Position
from pyspark_aws_kinesis.source.settings import SourceSettings

CONSUMER = "bench-efo"


def source_options(server: Server, stream: str, efo: bool) -> dict[str, str]:
    kind = "efo" if efo else "polling"
    patient = {"kinesis.clientretryintervalsms": "500", "kinesis.clientmaxretryintervalms": "2000"}
    found = {**options(server, stream, f"/tmp/{stream}/{kind}/meta"), **patient}
    found.pop("kinesis.getrecords.fetchintervalms")  # the default 200 ms, as a user has it
    if efo:
        found |= {"kinesis.consumertype": "SubscribeToShard", "kinesis.consumername": CONSUMER}
    return found


def start_query(spark: Any, options: dict[str, str], latencies: list[float], trigger_ms: int, checkpoint: str) -> Any:
    def sink(frame: Any, _batch_id: int) -> None:
        rows = frame.select("data").collect()
        seen_ms = time.time() * 1000
        latencies.extend(seen_ms - json.loads(bytes(row.data))["t"] for row in rows)

    return (
        spark.readStream.format("aws-kinesis")
        .options(**options)
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=f"{trigger_ms} milliseconds")
        .start()
    )


def latency(server: Server, rate: int, seconds: float, trigger_ms: int) -> dict[str, list[float]]:
    kinesis = server.direct.client("kinesis")  # the producer's puts: not what is measured
    stream = create_stream(kinesis, unique_name("bench-efo-latency"), 1)
    spark = spark_session()
    results: dict[str, list[float]] = {"polling": [], "efo": []}
    queries = [
        start_query(
            spark, source_options(server, stream, kind == "efo"), results[kind], trigger_ms, f"/tmp/{stream}/{kind}"
        )
        for kind in results
    ]
    warm = [(json.dumps({"t": time.time() * 1000}).encode(), f"w{i}") for i in range(10)]
    put_records(kinesis, stream, warm)  # Spark starts its Python workers: outside the measurement
    while min(len(values) for values in results.values()) < len(warm):
        time.sleep(0.2)
    time.sleep(6)
    for values in results.values():
        values.clear()
    sent: list[int] = []
    produce(kinesis, stream, rate, seconds, sent)
    deadline = time.monotonic() + 60
    while min(len(values) for values in results.values()) < len(sent) and time.monotonic() < deadline:
        time.sleep(0.2)
    for query in queries:
        query.stop()
    spark.stop()
    return results


def throughput(server: Server, records: int) -> dict[str, tuple[int, float]]:
    kinesis = server.direct.client("kinesis")
    stream = create_stream(kinesis, unique_name("bench-efo-read"), 1)
    payload = os.urandom(1024)
    for start in range(0, records, 500):
        put_records(kinesis, stream, [(payload, f"k{i}") for i in range(start, min(records, start + 500))])
    (shard_id,) = list_shard_ids(kinesis, stream)
    task = ShardTask(stream, shard_id, 0, 2**128 - 1, Position(TRIM_HORIZON))
    measured: dict[str, tuple[int, float]] = {}
    for kind in ("polling", "efo"):
        settings = SourceSettings.from_options(source_options(server, stream, kind == "efo"))
        arn = None
        if settings.efo is not None:
            arn = ensure_consumer(server.client("kinesis"), stream, CONSUMER, settings.client.retry).arn
        shard_range, transport = settings.shard_reader(task, FetchLimits(), arn)
        started = time.perf_counter()
        rows = sum(batch.num_rows for batch in shard_range.batches(transport))
        measured[kind] = (rows, time.perf_counter() - started)
    return measured


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--trigger-ms", type=int, default=200)
    add_quota_flag(parser)
    args = parser.parse_args(argv)
    with local_aws(args, KINESIS_MOCK) as aws:
        server = aws.kinesis_mock
        read = throughput(server, args.records)
        lat = latency(server, args.rate, args.seconds, args.trigger_ms)
    print("kinesis-mock, 1 shard. kinesis-mock's speed is not AWS's: compare the two rows of this run only.")
    print(f"\nput -> row latency: {args.rate} records/s for {args.seconds:.0f} s, processingTime {args.trigger_ms} ms")
    print(f"| {'reader':<35} | {'records':>8} | {'p50 ms':>7} | {'p99 ms':>7} | {'max ms':>7} |")
    print(f"|{'-' * 37}|{'-' * 10}|{'-' * 9}|{'-' * 9}|{'-' * 9}|")
    names = {"polling": "GetRecords (polling, baseline)", "efo": "SubscribeToShard (enhanced fan-out)"}
    p50s = {}
    for kind, values in lat.items():
        p50, p99, worst = percentiles(values)
        p50s[kind] = p50
        print(f"| {names[kind]:<35} | {len(values):>8,} | {p50:>7.0f} | {p99:>7.0f} | {worst:>7.0f} |")
    print(f"EFO p50 / polling p50: {p50s['efo'] / p50s['polling']:.2f}")
    print(f"\nread throughput: {args.records:,} records of 1 KiB, TRIM_HORIZON to the tip, range reader (no Spark)")
    print(f"| {'transport':<35} | {'records':>8} | {'seconds':>7} | {'rec/s':>8} |")
    print(f"|{'-' * 37}|{'-' * 10}|{'-' * 9}|{'-' * 10}|")
    for kind, (rows, seconds) in read.items():
        print(f"| {names[kind]:<35} | {rows:>8,} | {seconds:>7.2f} | {rows / seconds:>8,.0f} |")
    rates = {kind: rows / seconds for kind, (rows, seconds) in read.items()}
    print(f"EFO / polling read rate: {rates['efo'] / rates['polling']:.2f}")
    print_quotas(aws)


if __name__ == "__main__":
    main()
