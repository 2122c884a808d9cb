"""What a task sends to one stream: rows turned into Kinesis records, split into lanes (parallel call sequences).

``pyspark_aws_kinesis.sink.task`` calls ``plan_plain`` (aggregation off: one Kinesis record per row) or
``plan_aggregated`` (KPL aggregates, one Aggregator per open shard of a ``ShardRouter``). After sending,
``moved_aggregates`` and ``misplaced_records`` find the user records of aggregates that a split or merge sent to a shard
whose hash-key range does not hold them; the task plans those again with ``plan_aggregated`` on a fresh listing.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from ..kpl import Aggregator, OutgoingRecord, UserRecord, deaggregate, hash_key_of
from .entries import Entry
from .routing import ShardRouter

# The size of the aggregates a write makes: a quarter of a shard's 1 MiB second, as a 1 MiB aggregate waits for a
# whole second that other writers left free (docs/sink.md, "At the write quota").
AGGREGATE_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class AggregateEntry(Entry):
    """A KPL aggregate planned for the open shard ``shard_id``: each of its user records hashes into that range.

    The planned shard stands for the user records' hash keys: if the PutRecords answer puts the aggregate on
    that shard, every user record is where a reader of the shard expects it, and nothing needs unpacking.
    """

    shard_id: str = ""


def lane_of_key(partition_key: str, lanes: int) -> int:
    """Lane (concurrent PutRecords sequence) for a non-aggregated record: same key, same lane, kept in order."""
    return zlib.crc32(partition_key.encode("utf-8")) % lanes if lanes > 1 else 0


@dataclass
class PlannedRecords:
    """What one task sends to one stream: Kinesis records split into lanes, plus counts for the commit."""

    lanes: list[list[Entry]]
    user_records: int = 0
    aggregates: int = 0


def plan_plain(data: list[bytes], keys: list[str], hash_keys: list[str | None], lanes: int) -> PlannedRecords:
    """One Kinesis record per row; rows of one partition key share a lane so their order holds.

    Plain records need no landing check after a reshard: Kinesis routes each by its own hash key.
    """
    planned = PlannedRecords([[] for _ in range(lanes)], user_records=len(data))
    for payload, key, hash_key in zip(data, keys, hash_keys, strict=True):
        planned.lanes[lane_of_key(key, lanes)].append(Entry(payload, key, hash_key))
    return planned


def plan_aggregated(
    data: list[bytes], keys: list[str], hash_keys: list[str | None], router: ShardRouter, lanes: int
) -> PlannedRecords:
    """KPL aggregates, one Aggregator per open shard so each aggregate lands on its records' shard.

    Records with an explicit hash key get Aggregators of their own: aws-kinesis-agg's deaggregator gives a
    record without one the table's first explicit hash key when an aggregate mixes both kinds.
    """
    aggregators: dict[tuple[int, bool], Aggregator] = {}
    planned = PlannedRecords([[] for _ in range(lanes)], user_records=len(data))
    shard_of_key: dict[str, int] = {}  # partition keys repeat a lot; MD5 once per key

    def emit(shard: int, record: OutgoingRecord) -> None:
        if record.user_records > 1:
            entry: Entry = AggregateEntry(
                record.data, record.partition_key, record.explicit_hash_key, router.shard_id(shard)
            )
            planned.aggregates += 1
        else:  # a lone or oversized record goes plain: Kinesis routes it by its own key
            entry = Entry(record.data, record.partition_key, record.explicit_hash_key)
        planned.lanes[shard % lanes].append(entry)

    for payload, key, hash_key in zip(data, keys, hash_keys, strict=True):
        if len(router) == 1:
            shard = 0
        elif hash_key is not None:
            shard = router.shard_of(int(hash_key))
        else:
            shard = shard_of_key.get(key)
            if shard is None:
                shard = shard_of_key[key] = router.shard_of(hash_key_of(key))
        aggregator = aggregators.get((shard, hash_key is None))
        if aggregator is None:
            aggregator = aggregators[shard, hash_key is None] = Aggregator(AGGREGATE_BYTES)
        for record in aggregator.add(payload, key, hash_key):
            emit(shard, record)
    for (shard, _), aggregator in aggregators.items():
        record = aggregator.flush()
        if record is not None:
            emit(shard, record)
    return planned


def moved_aggregates(landings: Iterable[tuple[Entry, str]]) -> list[tuple[AggregateEntry, str]]:
    """The aggregates that the PutRecords answers put on another shard than planned, with the shard they got."""
    return [
        (entry, landed) for entry, landed in landings if isinstance(entry, AggregateEntry) and entry.shard_id != landed
    ]


def misplaced_records(moved: Iterable[tuple[AggregateEntry, str]], router: ShardRouter) -> list[UserRecord]:
    """User records of moved aggregates that the shard they landed on does not hold (``router``: a fresh listing).

    Readers (ours, the KCL) drop the sub-records of an aggregate whose hash key is outside the shard's range, so
    exactly these are lost unless sent again. The others are read from the shard they landed on: sending them
    again too would have every reader see them twice, so they are not. A landed shard the listing does not show
    (it cannot hold a record yet be unlisted, but if it did) counts as holding none of them.
    """
    misplaced: list[UserRecord] = []
    for entry, landed in moved:
        shard = router.listed(landed)
        misplaced += [
            record for record in deaggregate(entry.data) if shard is None or not shard.holds_hash_key(record.hash_key)
        ]
    return misplaced
