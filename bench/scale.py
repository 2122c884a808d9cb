"""Driver planning time per micro-batch for 1, 16, 64 and 256 shards (kinesalite), against a naive boto3 plan.

Run: ``.venv/bin/python -m bench.scale [--shards 1,16,64,256] [--rounds N]``.

For each shard count, a stream gets one record per shard per round; ours is ``KinesisStreamReader.latestOffset``
(the driver's whole job per trigger) measured in two states:
- *busy*: right after a batch that read every shard: read N metadata records, list shards, probe N shards;
- *idle*: nothing new since the last batch: list shards (cached within describeShardInterval), probe N shards
  (a GetShardIterator + GetRecords each, as positions moved);
- *steady idle*: still nothing new: one GetRecords per shard on the iterators the last probes kept.
Baseline, in the same run: what a hand-written driver does to learn the same thing with plain boto3 calls, one
after the other: ListShards, then GetShardIterator + GetRecords(Limit=1) per shard. Printed: median ms of the
rounds and the ratio (baseline / ours). Nothing here is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

from bench.common import options
from connector.shards import list_shards
from connector.stream_reader import KinesisStreamReader
from localaws import LocalAws
from localaws.servers import KINESALITE
from localaws.streams import create_stream, unique_name


def one_record_per_shard(kinesis: Any, stream: str, shards: list, tag: str) -> None:
    entries = [
        {"Data": tag.encode(), "PartitionKey": "k", "ExplicitHashKey": str(shard.starting_hash_key)} for shard in shards
    ]
    for start in range(0, len(entries), 500):
        assert kinesis.put_records(StreamName=stream, Records=entries[start : start + 500])["FailedRecordCount"] == 0


def naive_plan(kinesis: Any, stream: str) -> int:
    """The baseline driver: list the shards, then ask each one, in turn, whether it has a record."""
    waiting = 0
    for shard in list_shards(kinesis, stream):
        iterator = kinesis.get_shard_iterator(
            StreamName=stream, ShardId=shard.shard_id, ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        waiting += bool(kinesis.get_records(ShardIterator=iterator, Limit=1)["Records"])
    return waiting


def timed_ms(run) -> tuple[float, Any]:
    started = time.perf_counter()
    value = run()
    return (time.perf_counter() - started) * 1000, value


def measure(kinesis: Any, endpoint_stream: tuple, count: int, rounds: int) -> dict[str, float]:
    server, stream = endpoint_stream
    shards = list_shards(kinesis, stream)
    samples: dict[str, list[float]] = {"baseline": [], "busy": [], "idle": [], "steady": []}
    with tempfile.TemporaryDirectory() as metadata:
        opts = options(server, stream, metadata) | {"kinesis.shardsperpartition": "16"}
        reader = KinesisStreamReader(None, opts)  # type: ignore[arg-type]
        start = reader.initialOffset()
        for round_ in range(rounds + 1):  # round 0 warms up (first listing, threads, clients)
            one_record_per_shard(kinesis, stream, shards, f"r{round_}")
            time.sleep(0.25)  # past the probe interval of the last idle plan, which saw nothing
            busy_ms, end = timed_ms(lambda s=start: reader.latestOffset(s, None))
            assert end != start
            rows = sum(batch.num_rows for p in reader.partitions(start, end) for batch in reader.read(p))
            assert rows == count, rows
            reader.commit(end)
            start = end
            time.sleep(0.25)  # past the probe interval: the idle plan really asks every shard
            idle_ms, same = timed_ms(lambda s=start: reader.latestOffset(s, None))
            assert same == start
            time.sleep(0.25)
            steady_ms, same = timed_ms(lambda s=start: reader.latestOffset(s, None))  # iterators kept from before
            assert same == start
            baseline_ms, _ = timed_ms(lambda: naive_plan(kinesis, stream))
            if round_:
                samples["busy"].append(busy_ms)
                samples["idle"].append(idle_ms)
                samples["steady"].append(steady_ms)
                samples["baseline"].append(baseline_ms)
    return {name: statistics.median(values) for name, values in samples.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", default="1,16,64,256")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    counts = [int(value) for value in args.shards.split(",")]
    print(f"median of {args.rounds} rounds; kinesalite on 127.0.0.1; one record per shard per round")
    columns = ["shards", "baseline ms", "busy ms", "ratio", "idle ms", "ratio", "steady idle ms", "ratio"]
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join("-" * (len(name) + 2) for name in columns) + "|  (ratio = baseline / ours)")
    with LocalAws([KINESALITE]) as aws:
        kinesis = aws.kinesalite.client("kinesis")
        for count in counts:
            stream = create_stream(kinesis, unique_name("bench-scale"), count)
            result = measure(kinesis, (aws.kinesalite, stream), count, args.rounds)
            base = result["baseline"]
            cells = [f"{count:>6}", f"{base:>11.1f}"]
            for name, width in (("busy", 7), ("idle", 7), ("steady", 14)):
                cells += [f"{result[name]:>{width}.1f}", f"{base / result[name]:>5.2f}"]
            print("| " + " | ".join(cells) + " |", flush=True)
            kinesis.delete_stream(StreamName=stream)


if __name__ == "__main__":
    main()
