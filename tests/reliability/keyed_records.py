"""Numbered, keyed records for the reliability suite, and the checks made on what a sink received.

Each record's data is ``<key>:<n>`` (n counts per partition key from 0), so a sink's rows say by themselves
which record they are: a missing ``n`` is a loss, a repeated one a duplicate, and per key the Kinesis sequence
numbers must rise with ``n`` (order kept: within a shard, sequence order is arrival order).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from localaws import LocalServer
from localaws.streams import put_records


class KeyedProducer:
    """Sends ``<key>:<n>`` records round-robin over ``keys`` partition keys and remembers what it sent."""

    def __init__(self, server: LocalServer, stream: str, keys: int = 8) -> None:
        self.kinesis = server.client("kinesis")
        self.stream = stream
        self.keys = [f"key-{index}" for index in range(keys)]
        self.next_n = dict.fromkeys(self.keys, 0)

    def send(self, count: int) -> None:
        """Put ``count`` more records (in PutRecords batches of up to 500, order kept per key)."""
        records = []
        for index in range(count):
            key = self.keys[index % len(self.keys)]
            records.append((f"{key}:{self.next_n[key]}".encode(), key))
            self.next_n[key] += 1
        put_records(self.kinesis, self.stream, records)

    @property
    def sent(self) -> set[str]:
        return {f"{key}:{n}" for key, last in self.next_n.items() for n in range(last)}


def ids(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """The ``<key>:<n>`` ids of sink rows (``data`` as bytes or bytearray)."""
    return [bytes(row["data"]).decode() for row in rows]


def duplicates(rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Ids that appear more than once, with their counts."""
    return {record: count for record, count in Counter(ids(rows)).items() if count > 1}


def order_breaks(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """Per partition key, places where the Kinesis order (shard, sequence number) does not follow ``n``."""
    by_key: dict[str, list[tuple[str, int, int]]] = {}
    for row in rows:
        key, n = bytes(row["data"]).decode().rsplit(":", 1)
        by_key.setdefault(key, []).append((row["shardId"], int(row["sequenceNumber"]), int(n)))
    breaks = []
    for key, entries in by_key.items():
        if len({shard for shard, _, _ in entries}) > 1:
            breaks.append(f"{key}: on several shards")
        numbers = [n for _, _, n in sorted(entries)]
        breaks.extend(f"{key}: {a} before {b}" for a, b in itertools.pairwise(numbers) if a >= b)
    return breaks


def assert_exactly_once_in_order(rows: list[Mapping[str, Any]], expected: set[str]) -> None:
    """Every expected record once, nothing else, each key in Kinesis order."""
    got = ids(rows)
    assert not duplicates(rows), f"duplicates: {sorted(duplicates(rows).items())[:20]}"
    missing, extra = expected - set(got), set(got) - expected
    assert not missing and not extra, f"missing {sorted(missing)[:20]} ({len(missing)}), extra {sorted(extra)[:20]}"
    breaks = order_breaks(rows)
    assert not breaks, f"per-key order broken: {breaks[:20]}"
