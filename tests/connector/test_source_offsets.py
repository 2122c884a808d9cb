"""Positions, the startingPosition grammar, offsets' JSON form, shard grouping and the listing interval."""

from __future__ import annotations

import json
import time

import pytest
from botocore.exceptions import ClientError
from source_util import payloads, read_all, reader, roundtrip, source_options

from connector.aws import kinesis_client
from connector.decode import Page
from connector.fetch.iterators import is_future_timestamp, iterator_request
from connector.fetch.range import skipped_rows
from connector.offsets import (
    AFTER_SEQUENCE_NUMBER,
    AT_SEQUENCE_NUMBER,
    AT_TIMESTAMP,
    LATEST,
    SHARD_END,
    TRIM_HORIZON,
    WHOLE_RECORD,
    KinesisOffset,
    PendingOffset,
    Position,
    parse_offset,
    parse_starting_position,
)
from connector.shards import ShardCatalog
from connector.source_settings import SourceSettings
from localaws import LocalServer
from localaws.streams import put_records


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
    with pytest.raises(ValueError, match="offset version"):
        parse_offset('{"v": 99}')


def test_iterators_and_skips_inside_an_aggregate() -> None:
    inside = Position(AFTER_SEQUENCE_NUMBER, "5", 2)
    assert iterator_request(inside) == {"ShardIteratorType": AT_SEQUENCE_NUMBER, "StartingSequenceNumber": "5"}
    assert iterator_request(Position(AFTER_SEQUENCE_NUMBER, "5", WHOLE_RECORD))["ShardIteratorType"] == (
        AFTER_SEQUENCE_NUMBER
    )
    page = Page(sequences=["5", "5", "5", "5", "6"], subs=[0, 1, 2, 3, 0], data=[b""] * 5)
    assert skipped_rows(inside, page) == 3  # rows 5/0..5/2 skipped: reading resumes at 5/3
    assert skipped_rows(Position(AT_SEQUENCE_NUMBER, "5", 1), page) == 1
    assert skipped_rows(Position(AT_SEQUENCE_NUMBER, "5", 0), page) == 0
    assert skipped_rows(Position(AFTER_SEQUENCE_NUMBER, "5", 3), page) == 4
    assert skipped_rows(Position(TRIM_HORIZON), page) == 0


def test_shards_are_grouped_into_partitions(kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    stream = lite_stream(shards=3)
    produced = [f"r{i}".encode() for i in range(30)]
    put_records(kinesalite.client("kinesis"), stream, [(data, f"k{i}") for i, data in enumerate(produced)])
    source = reader(source_options(kinesalite, stream, tmp_path, **{"kinesis.shardsPerPartition": "2"}))
    start = roundtrip(source.initialOffset())
    partitions = list(source.partitions(start, roundtrip(source.latestOffset(start, None))))
    assert [len(partition.tasks) for partition in partitions] == [2, 1]
    assert sorted(payloads(read_all(source, partitions))) == sorted(produced)


def test_listing_is_cached_for_the_describe_shard_interval(kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    stream = lite_stream(shards=1)
    calls = []
    settings = SourceSettings.from_options(source_options(kinesalite, stream, tmp_path))

    def counting_client():
        calls.append(1)
        return kinesis_client(settings.client)

    catalog = ShardCatalog(counting_client, settings.client.retry, min_interval_s=0.3)
    catalog.shards(stream)
    catalog.shards(stream)
    assert len(calls) == 1
    time.sleep(0.35)
    catalog.shards(stream)
    catalog.shards(stream, fresh=True)
    assert len(calls) == 3


def test_a_future_timestamp_refusal_is_recognised(kinesalite: LocalServer, lite_stream) -> None:
    stream = lite_stream(shards=1)
    kinesis = kinesalite.client("kinesis")
    with pytest.raises(ClientError) as refused:
        kinesis.get_shard_iterator(
            StreamName=stream,
            ShardId="shardId-000000000000",
            ShardIteratorType="AT_TIMESTAMP",
            Timestamp=time.time() + 3600,
        )
    assert is_future_timestamp(refused.value)
