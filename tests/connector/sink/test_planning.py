"""Sink planning (``pyspark_aws_kinesis.sink.planning``): aggregates grouped per shard, readable by aws-kinesis-agg
and by pyspark_aws_kinesis.kpl; lanes keep order; after a reshard only the records outside the shard an aggregate
landed on are misplaced."""

from __future__ import annotations

import base64
from collections import defaultdict

from aws_kinesis_agg.deaggregator import deaggregate_records

from pyspark_aws_kinesis.kpl import deaggregate, hash_key_of, is_aggregated
from pyspark_aws_kinesis.shards import MAX_HASH_KEY, Shard
from pyspark_aws_kinesis.sink.entries import DEFAULT_MAX_RECORD_BYTES, Entry
from pyspark_aws_kinesis.sink.planning import (
    AGGREGATE_BYTES,
    AggregateEntry,
    lane_of_key,
    misplaced_records,
    moved_aggregates,
    plan_aggregated,
    plan_plain,
)
from pyspark_aws_kinesis.sink.routing import ShardRouter
from tests.connector.sink.shard_map_util import FOUR_SHARDS, router
from tests.connector.support.sink_util import MIDDLE, rows


def _unpack(entry: Entry) -> list[tuple[bytes, str, str | None]]:
    if is_aggregated(entry.data):
        return [(r.data, r.partition_key, r.explicit_hash_key) for r in deaggregate(entry.data)]
    return [(entry.data, entry.partition_key, entry.explicit_hash_key)]


def _unpack_with_aws_kinesis_agg(entry: Entry) -> list[tuple[bytes, str, str | None]]:
    # The library takes Lambda-style records (base64 data) and prints, rather than raises, on a bad aggregate.
    lambda_record = {
        "kinesis": {
            "kinesisSchemaVersion": "1.0",
            "sequenceNumber": "1",
            "approximateArrivalTimestamp": 0,
            "partitionKey": entry.partition_key,
            "explicitHashKey": entry.explicit_hash_key,
            "data": base64.b64encode(entry.data),
        }
    }
    return [
        (base64.b64decode(r["kinesis"]["data"]), r["kinesis"]["partitionKey"], r["kinesis"].get("explicitHashKey"))
        for r in deaggregate_records([lambda_record])
    ]


def _rows(count: int, keys: int = 50, size: int = 100, every_nth_hash_key: int = 0):
    data = [f"{i:0{size}d}".encode() for i in range(count)]
    partition_keys = [f"user-{i % keys}" for i in range(count)]
    hash_keys = [
        str(i * 7919 % 2**128) if every_nth_hash_key and i % every_nth_hash_key == 0 else None for i in range(count)
    ]
    return data, partition_keys, hash_keys


def test_each_aggregate_holds_only_records_of_the_shard_it_lands_on() -> None:
    data, keys, hash_keys = _rows(5000, every_nth_hash_key=5)
    planned = plan_aggregated(data, keys, hash_keys, FOUR_SHARDS, lanes=1)
    (entries,) = planned.lanes
    assert planned.user_records == 5000 and 0 < planned.aggregates == len(entries) < 20
    for entry in entries:
        landing_shard = FOUR_SHARDS.shard_of(hash_key_of(entry.partition_key, entry.explicit_hash_key))
        for _, key, hash_key in _unpack(entry):
            assert FOUR_SHARDS.shard_of(hash_key_of(key, hash_key)) == landing_shard


def test_aggregates_unpack_identically_with_aws_kinesis_agg_and_connector_kpl() -> None:
    data, keys, hash_keys = _rows(3000, every_nth_hash_key=3)
    (entries,) = plan_aggregated(data, keys, hash_keys, FOUR_SHARDS, lanes=1).lanes
    ours = [record for entry in entries for record in _unpack(entry)]
    theirs = [record for entry in entries for record in _unpack_with_aws_kinesis_agg(entry)]
    assert ours == theirs
    assert sorted(ours) == sorted(zip(data, keys, hash_keys, strict=True))


def test_records_of_one_key_keep_their_order() -> None:
    data, keys, hash_keys = _rows(4000, keys=13)
    entries = [e for lane in plan_aggregated(data, keys, hash_keys, FOUR_SHARDS, lanes=3).lanes for e in lane]
    seen: dict[str, list[bytes]] = defaultdict(list)
    for entry in entries:
        for payload, key, _ in _unpack(entry):
            seen[key].append(payload)
    for key, payloads in seen.items():
        assert payloads == [d for d, k in zip(data, keys, strict=True) if k == key]


def test_aggregates_stay_within_1_mib_and_big_records_travel_alone() -> None:
    large = b"L" * (4 * DEFAULT_MAX_RECORD_BYTES)  # a stream raised above 1 MiB takes it; never aggregated
    data = [b"x" * 400_000, b"y" * 400_000, b"z" * 400_000, b"s" * 10, b"w" * (DEFAULT_MAX_RECORD_BYTES - 2), large]
    keys = ["k1"] * 6
    (entries,) = plan_aggregated(data, keys, [None] * 6, FOUR_SHARDS, lanes=1).lanes
    assert all(entry.size <= DEFAULT_MAX_RECORD_BYTES for entry in entries if entry.data != large)
    assert [payload for entry in entries for payload, _, _ in _unpack(entry)] == data
    assert Entry(b"w" * (DEFAULT_MAX_RECORD_BYTES - 2), "k1") in entries  # too big to share: sent plain
    assert Entry(large, "k1") in entries


def test_aggregates_are_a_quarter_of_a_shards_second_so_writers_can_take_turns() -> None:
    """2 MiB of 1 KB rows for one shard: aggregates of at most 256 KiB (a 1 MiB aggregate fits only into a whole
    paid-back second of the shard, which another writer's records rarely leave)."""
    data, keys = [b"x" * 1000] * 2048, [f"k{i}" for i in range(2048)]
    (entries,) = plan_aggregated(data, keys, [None] * 2048, router((0, MAX_HASH_KEY)), lanes=1).lanes
    assert len(entries) == 8 and all(entry.size <= AGGREGATE_BYTES == 256 * 1024 for entry in entries)


def test_one_shard_needs_no_hashing_and_packs_everything_together() -> None:
    data, keys, hash_keys = _rows(2000, size=20)
    planned = plan_aggregated(data, keys, hash_keys, router((0, MAX_HASH_KEY)), lanes=1)
    assert planned.aggregates == len(planned.lanes[0]) == 1


def test_plain_records_share_a_lane_per_key_in_order() -> None:
    data, keys, hash_keys = _rows(1000, keys=9)
    planned = plan_plain(data, keys, hash_keys, lanes=4)
    assert planned.user_records == 1000 and planned.aggregates == 0
    assert sum(len(lane) for lane in planned.lanes) == 1000 and all(planned.lanes)
    for index, lane in enumerate(planned.lanes):
        assert {lane_of_key(e.partition_key, 4) for e in lane} == {index}
        for key in {e.partition_key for e in lane}:
            assert [e.data for e in lane if e.partition_key == key] == [
                d for d, k in zip(data, keys, strict=True) if k == key
            ]


# --- the landing check, on a fake PutRecords answer -------------------------------------------------------


def _shard(name: str, low: int, high: int, closed: bool = False) -> Shard:
    return Shard(name, None, None, low, high, "0", "9" if closed else None)


PARENT = _shard("parent", 0, MAX_HASH_KEY)
LOW, HIGH = _shard("low", 0, MIDDLE - 1), _shard("high", MIDDLE, MAX_HASH_KEY)
SPLIT = ShardRouter([_shard("parent", 0, MAX_HASH_KEY, closed=True), LOW, HIGH])


def test_only_the_records_outside_the_landed_shard_are_misplaced() -> None:
    records = rows(200)
    planned = plan_aggregated(
        [d for d, _ in records], [k for _, k in records], [None] * 200, ShardRouter([PARENT]), lanes=1
    )
    (aggregate,) = planned.lanes[0]
    assert isinstance(aggregate, AggregateEntry) and aggregate.shard_id == "parent"
    assert moved_aggregates([(aggregate, "parent")]) == []  # landed where planned: nothing to check
    moved = moved_aggregates([(aggregate, "low")])  # the answer names a child of a split since the listing
    misplaced = misplaced_records(moved, SPLIT)
    expected = sorted(data for data, key in records if hash_key_of(key) >= MIDDLE)
    assert 0 < len(expected) < 200
    assert sorted(record.data for record in misplaced) == expected
    # An aggregate whose records all hash into the child it landed on (or into a merged shard) stays as it is.
    low_only = [(data, key) for data, key in records if hash_key_of(key) < MIDDLE]
    (held,) = plan_aggregated(
        [d for d, _ in low_only], [k for _, k in low_only], [None] * len(low_only), ShardRouter([PARENT]), lanes=1
    ).lanes[0]
    assert misplaced_records(moved_aggregates([(held, "low")]), SPLIT) == []
    # A shard the listing does not show holds nothing we can vouch for: all its records go again.
    assert len(misplaced_records(moved_aggregates([(aggregate, "unlisted")]), SPLIT)) == 200
