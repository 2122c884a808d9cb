"""The source's offsets (``pyspark_aws_kinesis.source.offsets``) and their JSON form: format 2 round-trips in a fixed
order, format 1 of existing checkpoints still loads (and a pending offset's resolution stored in it), the size per
shard at 10,000 shards, a damaged offset's clear error."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from pyspark_aws_kinesis.positions import (
    AFTER_SEQUENCE_NUMBER,
    AT_SEQUENCE_NUMBER,
    AT_TIMESTAMP,
    LATEST,
    SHARD_END,
    TRIM_HORIZON,
    WHOLE_RECORD,
    Position,
)
from pyspark_aws_kinesis.source.offsets import KinesisOffset, OffsetFormatError, PendingOffset, parse_offset
from tests.connector.support.source_util import format_1_json, reader, source_options


def test_offsets_round_trip_through_json() -> None:
    offset = KinesisOffset(
        "src",
        "/meta",
        4,
        {
            "s/shardId-1": Position(AFTER_SEQUENCE_NUMBER, "99", 3),
            "s/shardId-0": Position(SHARD_END),
            "s/shardId-2": Position(AT_TIMESTAMP, timestamp_ms=5),
        },
    )
    assert parse_offset(json.loads(offset.to_json())) == offset
    assert list(offset.active()) == ["s/shardId-1", "s/shardId-2"]
    pending = PendingOffset("abc", "/meta")
    assert parse_offset(pending.to_json()) == pending
    with pytest.raises(OffsetFormatError, match="offset version"):
        parse_offset('{"v": 99}')


# written by connector/offsets.py at 3fb384a
FORMAT_1 = Path(__file__).resolve().parents[1] / "support" / "data" / "offsets_v1.jsonl"
SEQ = "49657283001485624390471826103578919467182904836254842882"
SEQ2 = "49657283001507925135670356726719651232656883146958176274"
PINNED = {"kinesis.kpl.deaggregate": "true", "kinesis.kpl.passThroughCorruptAggregates": "false"}


def _orders(number: int, stream: str = "orders") -> str:
    return f"{stream}/shardId-{number:012d}"


FORMAT_1_OFFSETS = [  # what the fixture's lines hold, written out by hand
    KinesisOffset(
        "9f1c2e4b7a0d4c8e9b3f5a6d7e8f9012",
        "s3://my-bucket/checkpoints/orders/kinesis-metadata",
        41,
        {
            _orders(0): Position(SHARD_END),
            _orders(1): Position(SHARD_END),
            _orders(2): Position(AFTER_SEQUENCE_NUMBER, SEQ, WHOLE_RECORD),
            _orders(3): Position(AFTER_SEQUENCE_NUMBER, SEQ2, 7),
            _orders(4): Position(AT_SEQUENCE_NUMBER, SEQ, 0),
            _orders(5): Position(TRIM_HORIZON),
            _orders(10): Position(AT_TIMESTAMP, timestamp_ms=1795449447490),
            _orders(0, "returns"): Position(AFTER_SEQUENCE_NUMBER, SEQ2, WHOLE_RECORD),
        },
        parents={_orders(2): (_orders(0),), _orders(5): (_orders(0), _orders(1))},
        reads=frozenset({_orders(2), _orders(3), _orders(0, "returns")}),
        max_records={_orders(2): 334, _orders(3): 333, _orders(0, "returns"): 333},
        until_ms=1795449447490,
        source_document=True,
        pinned={**PINNED, "kinesis.streamName": "orders,returns"},
    ),
    KinesisOffset(
        "0f3c5d2a1b9e4f7c8d6a5b4c3d2e1f00",
        "/tmp/aws-kinesis-metadata",
        -1,
        {_orders(0): Position(AT_TIMESTAMP, timestamp_ms=1795449400000), _orders(1): Position(TRIM_HORIZON)},
    ),
    KinesisOffset(
        "0f3c5d2a1b9e4f7c8d6a5b4c3d2e1f00",
        "dynamodb://kinesis-metadata?region=us-east-1",
        0,
        {_orders(0): Position(AFTER_SEQUENCE_NUMBER, SEQ, WHOLE_RECORD), _orders(1): Position(TRIM_HORIZON)},
        reads=frozenset({_orders(0)}),
        until_ms=1795449447490,
        source_document=True,
        pinned={**PINNED, "kinesis.streamName": "orders"},
    ),
    PendingOffset("5b0e8c7d6f4a4e3b9c2d1a0f9e8d7c6b", "/tmp/aws-kinesis-metadata"),
]


def test_format_1_offsets_of_existing_checkpoints_still_load() -> None:
    lines = FORMAT_1.read_text().splitlines()
    assert [parse_offset(line) for line in lines] == FORMAT_1_OFFSETS
    assert [parse_offset(json.loads(line)) for line in lines] == FORMAT_1_OFFSETS  # as pyspark hands them over
    # the tests' format-1 writer (source_util, used to make old checkpoints) writes exactly what 3fb384a wrote
    assert [format_1_json(offset) for offset in FORMAT_1_OFFSETS[:-1]] == lines[:-1]
    assert json.dumps(json.loads(FORMAT_1_OFFSETS[-1].to_json())) == lines[-1]  # pending offsets keep format 1


def test_format_2_round_trips_in_a_fixed_order() -> None:
    for offset in FORMAT_1_OFFSETS:
        text = offset.to_json()
        assert parse_offset(text) == offset
        assert parse_offset(json.loads(text)) == offset
    rich = FORMAT_1_OFFSETS[0]
    shuffled = replace(
        rich,
        shards=dict(reversed(rich.shards.items())),
        parents=dict(reversed(rich.parents.items())),
        max_records=dict(reversed(rich.max_records.items())),
        pinned=dict(reversed(rich.pinned.items())),  # type: ignore[union-attr]
    )
    assert shuffled.to_json() == rich.to_json()  # Spark compares offsets as text
    assert json.loads(rich.to_json())["streams"]["orders"] == {
        "after": {"2": SEQ, "3": f"{SEQ2}:7"},
        "at": {"4": f"{SEQ}:0"},
        "atTimestamp": {"10": 1795449447490},
        "trimHorizon": ["5"],
        "shardEnd": ["0", "1"],
        "parents": {"2": ["0"], "5": ["0", "1"]},
        "reads": {"2": 334, "3": 333},
    }


def test_format_2_keeps_unusual_shard_ids_and_caps_apart_from_reads() -> None:
    offset = KinesisOffset(
        "src",
        "/meta",
        3,
        {
            "s/shardId-7": Position(TRIM_HORIZON),  # not Kinesis' 12 digits: kept as it is
            "s/123": Position(TRIM_HORIZON),  # all digits: must not come back as shardId-000000000123
            "s/shardId-000000000123": Position(LATEST),
            "s/=x": Position(SHARD_END),
            "t/shardId-000000000001": Position(TRIM_HORIZON),
        },
        parents={"t/shardId-000000000001": ("s/=x",)},  # another stream's shard
        reads=frozenset({"s/123"}),
        max_records={"s/123": 5, "s/shardId-7": 2},  # a cap on a shard not read: caps stay a map of their own
    )
    assert parse_offset(offset.to_json()) == offset
    assert json.loads(offset.to_json())["streams"]["s"] == {
        "trimHorizon": ["=123", "shardId-7"],
        "latest": ["123"],
        "shardEnd": ["==x"],
        "reads": ["=123"],
        "maxRecords": {"=123": 5, "shardId-7": 2},
    }
    assert parse_offset(replace(offset, reads=None).to_json()) == replace(offset, reads=None)


def test_a_pending_offsets_resolution_stored_in_format_1_still_loads(tmp_path) -> None:
    """pyspark 4.0.2 checkpoints name a pending offset; the metadata store holds its resolution, in format 1 when
    an earlier version resolved it."""
    pending, resolved = FORMAT_1_OFFSETS[-1], FORMAT_1_OFFSETS[2]
    stored = tmp_path / "pending" / f"{pending.nonce}.json"  # the path store's layout (docs/source.md)
    stored.parent.mkdir()
    stored.write_text(FORMAT_1.read_text().splitlines()[2])
    nowhere = SimpleNamespace(endpoint_url="http://127.0.0.1:9")  # no Kinesis call is made
    source = reader(source_options(nowhere, "orders", tmp_path))  # type: ignore[arg-type]
    assert source.offsets.committed(replace(pending, metadata_path=str(tmp_path)).to_dict()) == resolved


def test_offset_size_per_shard_at_10000_shards() -> None:
    shards = {_orders(n): Position(AFTER_SEQUENCE_NUMBER, f"{int(SEQ) + n * 7919}") for n in range(10_000)}
    every_read = KinesisOffset("9f1c2e4b7a0d4c8e9b3f5a6d7e8f9012", "/m", 9, shards, reads=frozenset(shards))
    one_in_ten = replace(every_read, reads=frozenset(list(shards)[::10]))
    for offset, limit in ((every_read, 80), (one_in_ten, 70)):
        checkpointed = json.dumps(offset.to_dict())  # as pyspark writes it
        assert len(checkpointed) / 10_000 <= limit
        assert len(format_1_json(offset)) / 10_000 > 150  # format 1 of the same offset


def test_a_damaged_offset_is_a_clear_error() -> None:
    with pytest.raises(OffsetFormatError, match="not an aws-kinesis offset of format 2"):
        parse_offset('{"v": 2, "sourceId": "s", "metadataPath": "/m", "batchId": 1, "streams": {"s": {"after": 5}}}')
    with pytest.raises(ValueError, match="needs a decimal sequence number"):
        parse_offset(
            '{"v": 2, "sourceId": "s", "metadataPath": "/m", "batchId": 1, "streams": {"s": {"at": {"1": "x"}}}}'
        )
