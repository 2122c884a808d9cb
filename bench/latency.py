"""End-to-end latency and idle cost: put -> row visible in a foreachBatch sink, then empty batches while idle.

Run: ``.venv/bin/python -m bench.latency [--rate 200] [--seconds 30] [--idle-seconds 60] [--trigger-ms 200]``.

A producer thread puts ``--rate`` records/s (JSON carrying the time of the put) into a 2-shard kinesalite
stream. Two consumers read the same records in the same run:
- ours: a Structured Streaming query on ``aws-kinesis`` (processingTime trigger, default options, so a 200 ms
  fetch interval) into ``foreachBatch``, which stamps each row when its batch reaches the sink;
- baseline: a hand-written boto3 consumer, one thread per shard, GetRecords every 200 ms (the same interval).
Printed: p50 / p99 / max latency of each (target for ours: p50 <= 1.5 s, p99 <= 3 s), then the number of
micro-batches that ran during ``--idle-seconds`` without new records (target 0). Nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from typing import Any

from bench.common import spark_session
from localaws import LocalAws
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY, KINESALITE
from localaws.streams import create_stream, list_shard_ids, unique_name

SHARDS = 2
FETCH_INTERVAL_S = 0.2


def produce(kinesis: Any, stream: str, rate: int, seconds: float, sent: list[int]) -> None:
    """``rate`` records/s in 10 PutRecords calls per second; each record carries its put time (ms)."""
    per_call = max(1, rate // 10)
    started = time.monotonic()
    tick = 0
    while time.monotonic() - started < seconds:
        now_ms = time.time() * 1000
        records = [
            {"Data": json.dumps({"t": now_ms, "n": len(sent) + i}).encode(), "PartitionKey": f"k{len(sent) + i}"}
            for i in range(per_call)
        ]
        assert kinesis.put_records(StreamName=stream, Records=records)["FailedRecordCount"] == 0
        sent.extend(range(per_call))
        tick += 1
        time.sleep(max(0.0, started + tick * 0.1 - time.monotonic()))


def boto3_consumer(kinesis: Any, stream: str, shard_id: str, latencies: list[float], stop: threading.Event) -> None:
    iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON")[
        "ShardIterator"
    ]
    while not stop.is_set():
        answer = kinesis.get_records(ShardIterator=iterator)
        seen_ms = time.time() * 1000
        bodies = [json.loads(record["Data"]) for record in answer["Records"]]
        latencies.extend(seen_ms - body["t"] for body in bodies if "warm" not in body)
        iterator = answer["NextShardIterator"]
        time.sleep(FETCH_INTERVAL_S)


def percentiles(values: list[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    cut = statistics.quantiles(ordered, n=100)
    return cut[49], cut[98], ordered[-1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--idle-seconds", type=float, default=60)
    parser.add_argument("--trigger-ms", type=int, default=200)
    args = parser.parse_args(argv)
    with LocalAws([KINESALITE]) as aws:
        server = aws.kinesalite
        kinesis = server.client("kinesis")
        stream = create_stream(kinesis, unique_name("bench-latency"), SHARDS)
        spark = spark_session()
        ours: list[float] = []
        batches: list[tuple[float, int]] = []  # (when, rows) of every micro-batch

        def sink(frame, _batch_id: int) -> None:
            rows = frame.select("data").collect()
            seen_ms = time.time() * 1000
            ours.extend(seen_ms - json.loads(bytes(row.data))["t"] for row in rows)
            batches.append((time.monotonic(), len(rows)))

        query = (
            spark.readStream.format("aws-kinesis")
            .option("kinesis.streamName", stream)
            .option("kinesis.endpointUrl", server.endpoint_url)
            .option("kinesis.awsAccessKeyId", DUMMY_ACCESS_KEY)
            .option("kinesis.awsSecretKey", DUMMY_SECRET_KEY)
            .option("kinesis.startingPosition", "TRIM_HORIZON")
            .option("kinesis.metadataPath", f"/tmp/{stream}/meta")
            .load()
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", f"/tmp/{stream}/cp")
            .trigger(processingTime=f"{args.trigger_ms} milliseconds")
            .start()
        )
        # Spark's first batches start its Python workers: warm up with a few records, outside the measurement.
        warm = [
            {"Data": json.dumps({"t": time.time() * 1000, "warm": 1}).encode(), "PartitionKey": f"w{i}"}
            for i in range(20)
        ]
        kinesis.put_records(StreamName=stream, Records=warm)
        while len(ours) < len(warm):
            time.sleep(0.1)
        time.sleep(2)
        ours.clear()
        baseline: list[float] = []
        stop = threading.Event()
        consumers = [
            threading.Thread(target=boto3_consumer, args=(kinesis, stream, shard, baseline, stop), daemon=True)
            for shard in list_shard_ids(kinesis, stream)
        ]
        for consumer in consumers:
            consumer.start()
        sent: list[int] = []
        produce(kinesis, stream, args.rate, args.seconds, sent)
        time.sleep(3)  # the last records reach both consumers
        stop.set()
        idle_from = time.monotonic()
        time.sleep(args.idle_seconds)
        idle_batches = [rows for when, rows in batches if when > idle_from]
        query.stop()
        spark.stop()
    print(f"{len(sent):,} records at {args.rate}/s for {args.seconds:.0f} s into {SHARDS} kinesalite shards; ")
    print(f"processingTime {args.trigger_ms} ms, fetch interval {FETCH_INTERVAL_S * 1000:.0f} ms")
    print(f"| {'consumer':<44} | {'records':>8} | {'p50 ms':>7} | {'p99 ms':>7} | {'max ms':>7} |")
    print(f"|{'-' * 46}|{'-' * 10}|{'-' * 9}|{'-' * 9}|{'-' * 9}|")
    for name, values in (("boto3 GetRecords loop, 200 ms (baseline)", baseline), ("aws-kinesis -> foreachBatch", ours)):
        p50, p99, worst = percentiles(values)
        print(f"| {name:<44} | {len(values):>8,} | {p50:>7.0f} | {p99:>7.0f} | {worst:>7.0f} |")
    print(
        f"\nidle {args.idle_seconds:.0f} s: {len(idle_batches)} micro-batches ran "
        f"({sum(1 for rows in idle_batches if rows == 0)} of them empty)"
    )


if __name__ == "__main__":
    main()
