"""Driver planning time per micro-batch with the DynamoDB metadata store against the path store, 16 and 256 shards.

Run: ``.venv/bin/python -m bench.metadata_planning [--shards 16,256] [--rounds N] [--no-quotas]`` (the readers
meet AWS's Kinesis quotas by default, ``bench.common``; the records are put directly).

Two readers of the same kinesalite stream, in the same run, differ only in their metadata store: the path store
(files in a local directory, the baseline) and the DynamoDB store (moto). Each round puts one record per shard,
then for each reader: ``latestOffset`` (*plan*: read the last batch's N records, list shards, probe), the
executors' reads (not timed), ``commit`` (*commit*: purge with ``kinesis.minBatchesToRetain=2``), and the
planner's lookup alone (*lookup*: ``get_shard_reads`` of N shards: one BatchGetItem per 100 against N file
reads). Printed: median ms of the rounds and the ratio DynamoDB / path (above 1: DynamoDB is slower).
moto is a local Python server: its latency is not DynamoDB's (single-digit ms per call in a region, more
per BatchGetItem of 100 items); read the ratios as call-count effects, not as AWS timings. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

from bench.common import add_quota_flag, local_aws, options, print_quotas
from localaws import LocalAws
from localaws.servers import KINESALITE, MOTO
from localaws.streams import create_stream, unique_name
from pyspark_aws_kinesis.positions import split_shard_key
from pyspark_aws_kinesis.shards import list_shards
from pyspark_aws_kinesis.source.offsets import parse_offset
from pyspark_aws_kinesis.source.stream_reader import KinesisStreamReader

STORES = ("path", "dynamodb")
MEASURES = ("plan", "lookup", "commit")


def one_record_per_shard(kinesis: Any, stream: str, shards: list, tag: str) -> None:
    entries = [
        {"Data": tag.encode(), "PartitionKey": "k", "ExplicitHashKey": str(shard.starting_hash_key)} for shard in shards
    ]
    for start in range(0, len(entries), 500):
        assert kinesis.put_records(StreamName=stream, Records=entries[start : start + 500])["FailedRecordCount"] == 0


def timed_ms(run) -> tuple[float, Any]:
    started = time.perf_counter()
    value = run()
    return (time.perf_counter() - started) * 1000, value


def make_reader(aws: LocalAws, stream: str, store: str, metadata_dir: str) -> KinesisStreamReader:
    opts = options(aws.kinesalite, stream, metadata_dir) | {
        "kinesis.shardsperpartition": "16",
        "kinesis.minbatchestoretain": "2",
    }
    if store == "dynamodb":
        del opts["kinesis.metadatapath"]
        opts |= {
            "kinesis.metadatacommittertype": "DYNAMODB",
            "kinesis.dynamodb.tablename": unique_name("bench-meta"),
            "kinesis.dynamodb.endpointurl": aws.moto.endpoint_url,
        }
    return KinesisStreamReader(None, opts)  # type: ignore[arg-type]


def one_batch(reader: KinesisStreamReader, start: dict, count: int) -> tuple[dict, dict[str, float]]:
    """Plan, read (untimed), commit one batch and look its records up again; returns the end and the timings."""
    plan_ms, end = timed_ms(lambda: reader.latestOffset(start, None))
    assert end != start
    rows = sum(batch.num_rows for p in reader.partitions(start, end) for batch in reader.read(p))
    assert rows == count, rows
    commit_ms, _ = timed_ms(lambda: reader.commit(end))
    offset = parse_offset(end)
    store = reader.settings.metadata_store(offset.metadata_path)
    keys = [split_shard_key(key) for key in offset.active()]
    lookup_ms, found = timed_ms(lambda: store.get_shard_reads(offset.source_id, offset.batch_id, keys))
    assert all(read is not None for read in found.values())
    return end, {"plan": plan_ms, "lookup": lookup_ms, "commit": commit_ms}


def measure(aws: LocalAws, count: int, rounds: int) -> dict[tuple[str, str], float]:
    kinesis = aws.kinesalite.direct.client("kinesis")  # setting up and putting: not what is measured
    stream = create_stream(kinesis, unique_name("bench-meta"), count)
    shards = list_shards(kinesis, stream)
    samples: dict[tuple[str, str], list[float]] = {(s, m): [] for s in STORES for m in MEASURES}
    with tempfile.TemporaryDirectory() as metadata_dir:
        readers = {store: make_reader(aws, stream, store, metadata_dir) for store in STORES}
        starts = {store: reader.initialOffset() for store, reader in readers.items()}
        for round_ in range(rounds + 1):  # round 0 warms up (listing, clients, the table's creation)
            one_record_per_shard(kinesis, stream, shards, f"r{round_}")
            time.sleep(0.25)  # past the probe interval of the last plan
            for store, reader in readers.items():
                starts[store], timings = one_batch(reader, starts[store], count)
                if round_:
                    for name, value in timings.items():
                        samples[(store, name)].append(value)
    kinesis.delete_stream(StreamName=stream)
    return {key: statistics.median(values) for key, values in samples.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", default="16,256")
    parser.add_argument("--rounds", type=int, default=5)
    add_quota_flag(parser)
    args = parser.parse_args(argv)
    counts = [int(value) for value in args.shards.split(",")]
    print(
        f"median of {args.rounds} rounds; kinesalite + moto on 127.0.0.1; one record per shard per round. "
        "moto's latency is not AWS DynamoDB's: compare call patterns, not absolute times."
    )
    columns = ["shards"] + [f"{m} {s} ms" for m in MEASURES for s in STORES] + [f"{m} ratio" for m in MEASURES]
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join("-" * (len(name) + 2) for name in columns) + "|  (ratio = DynamoDB / path)")
    with local_aws(args, KINESALITE, MOTO) as aws:
        for count in counts:
            result = measure(aws, count, args.rounds)
            cells = [f"{count:>6}"]
            cells += [f"{result[(s, m)]:>{len(f'{m} {s} ms')}.1f}" for m in MEASURES for s in STORES]
            cells += [f"{result[('dynamodb', m)] / result[('path', m)]:>{len(m) + 6}.2f}" for m in MEASURES]
            print("| " + " | ".join(cells) + " |", flush=True)
    print_quotas(aws)


if __name__ == "__main__":
    main()
