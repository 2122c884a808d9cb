"""``pyspark_aws_kinesis.fetch.iterators``: the GetShardIterator request for each kind of position (inside a KPL
aggregate too), a handed-on iterator used only at its position and while fresh, and Kinesis's refusal of a future
timestamp told apart from other errors."""

from __future__ import annotations

import time

import pytest
from botocore.exceptions import ClientError

from pyspark_aws_kinesis.clock import now_ms
from pyspark_aws_kinesis.fetch.decode import Page
from pyspark_aws_kinesis.fetch.iterators import (
    ITERATOR_MAX_AGE_MS,
    Handoff,
    freshest,
    is_future_timestamp,
    iterator_request,
)
from pyspark_aws_kinesis.fetch.range import skipped_rows
from pyspark_aws_kinesis.positions import (
    AFTER_SEQUENCE_NUMBER,
    AT_SEQUENCE_NUMBER,
    TRIM_HORIZON,
    WHOLE_RECORD,
    Position,
)


def test_a_handoff_is_used_only_at_its_position_and_while_fresh() -> None:
    at = Position(AFTER_SEQUENCE_NUMBER, "5", WHOLE_RECORD)
    assert Handoff.received(at, "it").usable_for(at)
    assert not Handoff.received(at, "it").usable_for(Position(AFTER_SEQUENCE_NUMBER, "6", WHOLE_RECORD))
    assert not Handoff(at, "it", now_ms() - ITERATOR_MAX_AGE_MS).usable_for(at)


def test_freshest_takes_the_newest_usable_handoff_and_the_first_on_a_tie() -> None:
    at = Position(AFTER_SEQUENCE_NUMBER, "5", WHOLE_RECORD)
    equal = Position(AFTER_SEQUENCE_NUMBER, "5", WHOLE_RECORD)  # the same position, another object
    now = now_ms()
    old, new, newer_elsewhere = (
        Handoff(at, "old", now - 1000),
        Handoff(equal, "new", now - 10),
        Handoff(Position(AFTER_SEQUENCE_NUMBER, "6", WHOLE_RECORD), "x", now),
    )
    expired = Handoff(at, "expired", now - ITERATOR_MAX_AGE_MS - 1)
    assert freshest(at, old, None, new, newer_elsewhere, expired) is new
    assert freshest(at, new, old) is new
    assert freshest(at, expired, None, newer_elsewhere) is None
    assert freshest(at) is None
    twin = Handoff(at, "twin", new.at_ms)
    assert freshest(at, new, twin) is new and freshest(at, twin, new) is twin


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


@pytest.mark.parametrize("server, streams", [("kinesalite", "lite_stream"), ("kinesis_mock", "mock_stream")])
def test_a_future_timestamp_refusal_is_recognised(request: pytest.FixtureRequest, server: str, streams: str) -> None:
    # Each words it its own way; a refusal not recognised fails the query instead of waiting for Kinesis' clock.
    stream = request.getfixturevalue(streams)(shards=1)
    kinesis = request.getfixturevalue(server).client("kinesis")
    kinesis.put_record(StreamName=stream, Data=b"x", PartitionKey="k")  # kinesis-mock checks only a shard with data
    with pytest.raises(ClientError) as refused:
        kinesis.get_shard_iterator(
            StreamName=stream,
            ShardId="shardId-000000000000",
            ShardIteratorType="AT_TIMESTAMP",
            Timestamp=time.time() + 3600,
        )
    assert is_future_timestamp(refused.value)
