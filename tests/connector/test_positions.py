"""``pyspark_aws_kinesis.positions``: position names, the startingPosition grammar (a per-shard map, the awslabs form)
and the errors of bad positions."""

from __future__ import annotations

import json

import pytest

from pyspark_aws_kinesis.positions import (
    AFTER_SEQUENCE_NUMBER,
    AT_SEQUENCE_NUMBER,
    AT_TIMESTAMP,
    LATEST,
    TRIM_HORIZON,
    Position,
    parse_starting_position,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("latest", Position(LATEST)),
        (" TRIM_HORIZON ", Position(TRIM_HORIZON)),
        ("EARLIEST", Position(TRIM_HORIZON)),
        ("AT_TIMESTAMP:2026-11-22T08:00:00Z", Position(AT_TIMESTAMP, timestamp_ms=1795334400000)),
        ("AT_TIMESTAMP 2026-11-22T09:00:00.250+01:00", Position(AT_TIMESTAMP, timestamp_ms=1795334400250)),
    ],
)
def test_position_names(text: str, expected: Position) -> None:
    assert parse_starting_position(text).default == expected


def test_per_shard_map_with_default_and_awslabs_form() -> None:
    spec = parse_starting_position(
        json.dumps(
            {
                "*": "LATEST",
                "shardId-000000000001": {"iteratorType": "AFTER_SEQUENCE_NUMBER", "iteratorPosition": "123"},
                "orders/shardId-000000000002": {
                    "type": "AT_SEQUENCE_NUMBER",
                    "sequenceNumber": "7",
                    "subSequenceNumber": 2,
                },
                "shardId-000000000003": {"type": "AT_TIMESTAMP", "timestamp": "2026-11-22T08:00:00Z"},
                "metadata": {"streamName": "orders", "batchId": "3"},
            }
        )
    )
    assert spec.for_shard("orders", "shardId-000000000000") == Position(LATEST)
    assert spec.for_shard("orders", "shardId-000000000001") == Position(AFTER_SEQUENCE_NUMBER, "123")
    assert spec.for_shard("orders", "shardId-000000000002") == Position(AT_SEQUENCE_NUMBER, "7", 2)
    assert spec.for_shard("returns", "shardId-000000000002") == Position(LATEST)
    assert spec.for_shard("x", "shardId-000000000003").timestamp_ms == 1795334400000
    assert parse_starting_position('{"shardId-1": "LATEST"}').default == Position(TRIM_HORIZON)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"shardId-1": {"type": "AT_SEQUENCE_NUMBER"}}', "needs a decimal sequence number"),
        ('{"shardId-1": {"type": "SHARD_END"}}', "not a starting position"),
        ('{"shardId-1": "SOMEWHERE"}', "is not a position"),
        ("AT_TIMESTAMP:", "needs a time"),
    ],
)
def test_bad_positions(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_starting_position(text)
