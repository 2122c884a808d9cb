"""KPL aggregation: our aggregates read with aws-kinesis-agg, its aggregates read with ours, and the limits."""

from __future__ import annotations

import base64
import hashlib
import random
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from aws_kinesis_agg import deaggregator
from aws_kinesis_agg.aggregator import RecordAggregator

from pyspark_aws_kinesis import kpl
from pyspark_aws_kinesis.kpl import (
    MAGIC,
    MAX_RECORD_BYTES,
    Aggregator,
    KplFormatError,
    OutgoingRecord,
    UserRecord,
    _messages,
    deaggregate,
    hash_key_of,
    is_aggregated,
)


def _records(count: int, seed: int = 7, max_size: int = 300) -> list[tuple[bytes, str, str | None]]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        data = rng.randbytes(rng.randint(0, max_size))
        explicit = str(rng.getrandbits(128)) if i % 5 == 0 else None
        out.append((data, f"key-{rng.randint(0, 30)}", explicit))
    return out


def _aggregate_all(records, max_bytes: int = MAX_RECORD_BYTES) -> list[OutgoingRecord]:
    aggregator = Aggregator(max_bytes)
    out: list[OutgoingRecord] = []
    for data, key, explicit in records:
        out.extend(aggregator.add(data, key, explicit))
    last = aggregator.flush()
    if last:
        out.append(last)
    return out


def _unpack(outgoing: list[OutgoingRecord]) -> list[tuple[bytes, str, str | None]]:
    unpacked = []
    for record in outgoing:
        if is_aggregated(record.data):
            unpacked.extend((u.data, u.partition_key, u.explicit_hash_key) for u in deaggregate(record.data))
        else:
            unpacked.append((record.data, record.partition_key, record.explicit_hash_key))
    return unpacked


def _lambda_style(record: OutgoingRecord) -> dict:
    """The event shape aws-kinesis-agg's deaggregator reads: a Lambda-style event. Without any of these keys it
    prints an error and yields nothing instead of raising (docs/sink.md)."""
    return {
        "kinesis": {
            "kinesisSchemaVersion": "1.0",
            "partitionKey": record.partition_key,
            "sequenceNumber": "1",
            "approximateArrivalTimestamp": 0,
            "data": base64.b64encode(record.data).decode(),
        }
    }


@pytest.mark.parametrize("max_bytes", [MAX_RECORD_BYTES, 4096, 600])
def test_round_trip_keeps_every_record_in_order(max_bytes: int) -> None:
    records = _records(500)
    outgoing = _aggregate_all(records, max_bytes)
    assert _unpack(outgoing) == records
    assert sum(r.user_records for r in outgoing) == len(records)


@pytest.mark.parametrize("max_bytes", [MAX_RECORD_BYTES, 4096, 600])
def test_aggregates_never_exceed_the_size_limit(max_bytes: int) -> None:
    for record in _aggregate_all(_records(500, seed=3), max_bytes):
        if record.user_records > 1:
            assert len(record.data) + len(record.partition_key.encode()) <= max_bytes


def test_small_records_are_packed_densely() -> None:
    records = [(b"x" * 100, f"k{i % 7}", None) for i in range(20_000)]
    outgoing = _aggregate_all(records)
    assert len(outgoing) == 3  # ~2.2 MB of records in 1 MiB aggregates
    assert all(len(r.data) > 0.9 * MAX_RECORD_BYTES for r in outgoing[:-1])


def test_subsequence_numbers_count_from_zero() -> None:
    outgoing = _aggregate_all([(b"a", "k", None), (b"b", "k", None), (b"c", "j", None)])
    assert len(outgoing) == 1
    assert [u.sub_sequence_number for u in deaggregate(outgoing[0].data)] == [0, 1, 2]


def test_lone_record_goes_out_plain() -> None:
    outgoing = _aggregate_all([(b"only", "k", None)])
    assert outgoing == [OutgoingRecord(b"only", "k", None, 1)]
    assert not is_aggregated(outgoing[0].data)


def test_record_too_big_to_aggregate_goes_out_plain_after_pending_aggregate() -> None:
    big = b"z" * (MAX_RECORD_BYTES - 10)
    aggregator = Aggregator()
    assert aggregator.add(b"a", "k") == []
    assert aggregator.add(b"b", "k") == []
    completed = aggregator.add(big, "k")
    assert [r.user_records for r in completed] == [2, 1]
    assert completed[1].data == big
    assert aggregator.flush() is None


def test_our_aggregates_deaggregate_with_aws_kinesis_agg() -> None:
    records = _records(300, seed=11)
    outgoing = _aggregate_all(records, 8192)
    assert any(r.user_records > 1 for r in outgoing)
    theirs = list(deaggregator.iter_deaggregate_records([_lambda_style(r) for r in outgoing]))
    got = [(base64.b64decode(r["kinesis"]["data"]), r["kinesis"]["partitionKey"]) for r in theirs]
    assert got == [(data, key) for data, key, _ in records]


def test_aws_kinesis_agg_aggregates_deaggregate_with_ours() -> None:
    aggregator = RecordAggregator()
    records = _records(200, seed=5)
    for data, key, explicit in records:
        assert aggregator.add_user_record(key, data, explicit) is None  # all fit in one aggregate
    _key, _explicit, data = aggregator.clear_and_get().get_contents()
    users = deaggregate(data)
    assert [(u.data, u.partition_key) for u in users] == [(d, k) for d, k, _ in records]
    assert [u.explicit_hash_key for u in users if u.explicit_hash_key] == [e for _, _, e in records if e]


def test_bad_checksum_is_a_format_error() -> None:
    good = _aggregate_all([(b"a", "k", None), (b"b", "k", None)])[0].data
    corrupt = good[:-1] + bytes([good[-1] ^ 0xFF])
    with pytest.raises(KplFormatError, match="MD5"):
        deaggregate(corrupt)


def test_bad_protobuf_with_valid_checksum_is_a_format_error() -> None:
    body = b"\xff\xff\xff\xff\xff"
    with pytest.raises(KplFormatError, match="protobuf"):
        deaggregate(MAGIC + body + hashlib.md5(body).digest())


def test_plain_records_are_not_taken_for_aggregates() -> None:
    assert not is_aggregated(b"")
    assert not is_aggregated(MAGIC)
    assert not is_aggregated(b'{"id": 1}')


def test_hash_key_is_md5_of_partition_key_unless_explicit() -> None:
    assert hash_key_of("a") == int(hashlib.md5(b"a").hexdigest(), 16)
    assert hash_key_of("a", "42") == 42
    assert UserRecord(b"", "a", None, 0).hash_key == hash_key_of("a")


def test_aggregator_rejects_impossible_sizes() -> None:
    with pytest.raises(ValueError, match="between 64 and 1048576"):
        Aggregator(MAX_RECORD_BYTES + 1)


def test_size_accounting_matches_the_serialized_aggregate() -> None:
    aggregator = Aggregator()
    for data, key, explicit in _records(120, seed=9):
        aggregator.add(data, key, explicit)
    predicted = aggregator.size_bytes
    record = aggregator.flush()
    assert record is not None and record.user_records == 120
    assert predicted == len(record.data) + len(record.partition_key.encode())


def _hand_made(partition_keys: list[str], hash_keys: list[str], records: list[tuple[int, int | None]]) -> bytes:
    """An aggregate with the given key tables and user records (partition key index, explicit hash key index)."""
    message = _messages().AggregatedRecord()
    message.partition_key_table.extend(partition_keys)
    message.explicit_hash_key_table.extend(hash_keys)
    for index, (pk_index, hk_index) in enumerate(records):
        record = message.records.add()
        record.partition_key_index = pk_index
        if hk_index is not None:
            record.explicit_hash_key_index = hk_index
        record.data = f"d{index}".encode()
    body = message.SerializeToString()
    return MAGIC + body + hashlib.md5(body).digest()


def test_explicit_hash_keys_are_read_per_record() -> None:
    """Records with and without an explicit hash key in one aggregate, the tables shared through indexes."""
    users = deaggregate(_hand_made(["a", "b"], ["5", "7"], [(0, None), (1, 1), (0, 0), (1, None)]))
    assert [(u.data, u.partition_key, u.explicit_hash_key) for u in users] == [
        (b"d0", "a", None),
        (b"d1", "b", "7"),
        (b"d2", "a", "5"),
        (b"d3", "b", None),
    ]


@pytest.mark.parametrize(
    ("hash_keys", "records", "bad"),
    [
        ([], [(0, None), (1, None)], 1),  # a partition key index past its table
        ([], [(0, None), (0, 0)], 1),  # an explicit hash key index into an empty table
        (["5"], [(0, 0), (0, None), (0, 1)], 2),  # one past a non-empty table
    ],
)
def test_an_index_outside_the_key_tables_is_a_format_error(
    hash_keys: list[str], records: list[tuple[int, int | None]], bad: int
) -> None:
    with pytest.raises(KplFormatError, match=f"record {bad} points outside its key tables"):
        deaggregate(_hand_made(["a"], hash_keys, records))


class _WalkCounted:
    """A message's repeated field that counts how often it is walked."""

    def __init__(self, items: Any) -> None:
        self.items, self.walks = items, 0

    def __iter__(self) -> Iterator[Any]:
        self.walks += 1
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


@pytest.mark.parametrize("hash_keys", [[], ["5", "7"]])
def test_unpack_walks_the_user_records_once(monkeypatch: pytest.MonkeyPatch, hash_keys: list[str]) -> None:
    """Partition keys, explicit hash keys and data come from one walk of the records (each walk makes a wrapper
    object per user record), with and without explicit hash keys."""
    walked: list[_WalkCounted] = []
    real = _messages()

    class Counting:
        def __init__(self) -> None:
            self.message = real.AggregatedRecord()

        def ParseFromString(self, body: bytes | memoryview) -> None:  # protobuf's name
            self.message.ParseFromString(body)

        def __getattr__(self, name: str) -> Any:
            value = getattr(self.message, name)
            if name == "records":
                walked.append(_WalkCounted(value))
                return walked[-1]
            return value

    records = [(0, None), (1, 1 if hash_keys else None), (0, 0 if hash_keys else None)]
    aggregate = _hand_made(["a", "b"], hash_keys, records)
    monkeypatch.setattr(kpl, "_messages", lambda: SimpleNamespace(AggregatedRecord=Counting))
    unpacked = kpl.unpack(aggregate)
    assert unpacked.partition_keys == ["a", "b", "a"] and unpacked.data == [b"d0", b"d1", b"d2"]
    assert unpacked.explicit_hash_keys == ([None, "7", "5"] if hash_keys else [None, None, None])
    assert sum(field.walks for field in walked) == 1
