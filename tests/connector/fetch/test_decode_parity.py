"""Parity of ``pyspark_aws_kinesis.fetch.decode`` with botocore's own parser, on real kinesalite and kinesis-mock
answers.

The same GetRecords iterator is read twice: by a plain client (botocore parses the body) and by the reader client
(``pyspark_aws_kinesis.fetch.decode`` decodes the raw body). SubscribeToShard events (kinesis-mock) are read once, raw,
and each event's payload goes both to botocore's event-stream parser and to ``decode_subscribe_event``. The expected
user records come from botocore's parse, de-aggregated by aws-kinesis-agg's own deaggregator (an implementation
independent of ``pyspark_aws_kinesis.kpl``): every Page field the range rules use, and the Arrow batch, must agree.
Cases: every base64 padding length, unicode partition keys, a KPL aggregate with unicode keys (and an empty user
record), empty data, a record of the largest size Kinesis takes (1 MiB with its key), a large page, an empty page, a
closed shard's last page, and real answers with their optional fields taken out (botocore's parser on the same edited
body)."""

from __future__ import annotations

import base64
import json
import os
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import botocore.parsers
import pyarrow as pa
import pytest
from aws_kinesis_agg.aggregator import AggRecord, RecordAggregator
from botocore.eventstream import EventStreamBuffer

from localaws import LocalServer
from localaws.streams import put_records, set_max_record_size, wait_for_stream_active
from pyspark_aws_kinesis.aws.clients import RAW_BODY, kinesis_client, kinesis_reader_client
from pyspark_aws_kinesis.fetch.decode import (
    ARROW_SCHEMA,
    Page,
    ShardContext,
    decode_get_records,
    decode_subscribe_event,
)
from pyspark_aws_kinesis.fetch.fanout.subscriber import RAW_EVENT_STREAM, release
from pyspark_aws_kinesis.kpl import MAX_RECORD_BYTES
from pyspark_aws_kinesis.shards import MAX_HASH_KEY
from tests.connector.support.agg_util import agg_user_records
from tests.connector.support.efo_util import active_consumer, kinesis_for_subscriptions
from tests.connector.support.source_util import client_settings, first_shard_iterator

SHARD = "shardId-000000000000"
UNICODE_KEYS = ["ключ", "日本語キー", "emoji-😀", "café", 'a/b\\c"d', "\u00e9\u0301"]
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@pytest.fixture(params=["kinesalite", "kinesis_mock"])
def server(request: pytest.FixtureRequest) -> tuple[LocalServer, Any]:
    """(server, stream factory) for each of the two servers whose answers are compared."""
    streams = "lite_stream" if request.param == "kinesalite" else "mock_stream"
    return request.getfixturevalue(request.param), request.getfixturevalue(streams)


def _aggregate(records: list[tuple[bytes, str]]) -> tuple[bytes, str]:
    aggregator = RecordAggregator()
    for data, key in records:
        aggregator.add_user_record(key, data)
    key, _explicit, data = aggregator.clear_and_get().get_contents()
    return data, key


def _both(server: LocalServer, stream: str, iterator: str, limit: int = 10_000) -> tuple[dict[str, Any], Page]:
    """botocore's parse and our Page of the same GetRecords answer (the same iterator, read twice)."""
    settings = client_settings(server)
    parsed = kinesis_client(settings).get_records(ShardIterator=iterator, Limit=limit)
    raw = kinesis_reader_client(settings).get_records(ShardIterator=iterator, Limit=limit)[RAW_BODY]
    return parsed, decode_get_records(raw, ShardContext(stream, SHARD, 0, MAX_HASH_KEY))


def _one_body_both(server: LocalServer, stream: str, body: bytes) -> tuple[dict[str, Any], Page]:
    """botocore's parse (its JSON parser with GetRecords' output shape) and our Page of the same answer bytes: for
    answers whose time-dependent fields (MillisBehindLatest of a closed shard) differ between two calls."""
    shape = kinesis_client(client_settings(server)).meta.service_model.operation_model("GetRecords").output_shape
    parsed = botocore.parsers.create_parser("json").parse({"body": body, "headers": {}, "status_code": 200}, shape)
    return {"Records": [], **parsed}, decode_get_records(body, ShardContext(stream, SHARD, 0, MAX_HASH_KEY))


def _expected_rows(records: list[dict[str, Any]]) -> list[tuple[bytes, str, str, int, int | None, bool]]:
    """(data, key, sequence, sub-sequence, arrival µs, last of its record) per user record, by aws-kinesis-agg."""
    rows = []
    for record in records:
        stamp = record.get("ApproximateArrivalTimestamp")
        arrival = None if stamp is None else (stamp - EPOCH) // timedelta(microseconds=1)
        users = agg_user_records(record, arrival or 0)
        for index, user in enumerate(users):
            rows.append(
                (
                    base64.b64decode(user["data"]),
                    user["partitionKey"],
                    record["SequenceNumber"],
                    user.get("subSequenceNumber", 0),
                    arrival,
                    index == len(users) - 1,
                )
            )
    return rows


def _assert_parity(parsed: dict[str, Any], page: Page, stream: str, continuation: str = "NextShardIterator") -> None:
    """``page`` holds what botocore's ``parsed`` answer (or event) says, user records de-aggregated."""
    records = parsed["Records"]
    expected = _expected_rows(records)
    columns = list(
        zip(page.data, page.keys, page.sequences, page.subs, page.arrivals_us, page.record_ends, strict=True)
    )
    assert columns == expected
    assert page.kinesis_records == len(records)
    assert page.last_sequence == (records[-1]["SequenceNumber"] if records else None)
    assert page.millis_behind_latest == parsed.get("MillisBehindLatest")
    assert (page.next_iterator is None) == (parsed.get(continuation) is None)  # iterators differ per call
    assert page.dropped_out_of_range == 0
    batch = page.to_batch(ShardContext(stream, SHARD, 0, MAX_HASH_KEY), 0, len(page))
    assert batch.schema == ARROW_SCHEMA
    want = pa.table(
        {
            "data": pa.array([row[0] for row in expected], pa.binary()),
            "partitionKey": pa.array([row[1] for row in expected], pa.string()),
            "sequenceNumber": pa.array([row[2] for row in expected], pa.string()),
            "subSequenceNumber": pa.array([row[3] for row in expected], pa.int64()),
            "approximateArrivalTimestamp": pa.array(
                [None if row[4] is None else EPOCH + timedelta(microseconds=row[4]) for row in expected],
                pa.timestamp("us", tz="UTC"),
            ),
        }
    )
    assert pa.Table.from_batches([batch]).select(want.column_names).equals(want)
    assert set(batch.column("streamName").to_pylist()) <= {stream}
    assert set(batch.column("shardId").to_pylist()) <= {SHARD}


def test_plain_and_aggregated_records_match_botocore(server: tuple[LocalServer, Any]) -> None:
    """A page of plain records (every base64 padding, unicode keys, a 600 KB record), then a page holding a KPL
    aggregate (unicode keys and data) and a plain record: the two ways ``pyspark_aws_kinesis.fetch.decode`` builds a
    Page."""
    local, streams = server
    stream = streams(shards=1)
    plain = [(os.urandom(size), UNICODE_KEYS[size % len(UNICODE_KEYS)]) for size in range(1, 13)]
    plain.append((os.urandom(600_000), "large"))
    aggregate = _aggregate([(f"user-{i}-é".encode(), UNICODE_KEYS[i % len(UNICODE_KEYS)]) for i in range(7)])
    put_records(local.client("kinesis"), stream, [*plain, aggregate, (b"after", "ü")])
    parsed, page = _both(local, stream, first_shard_iterator(local, stream), limit=len(plain))
    assert len(page) == len(parsed["Records"]) == len(plain)
    _assert_parity(parsed, page, stream)
    parsed, page = _both(local, stream, parsed["NextShardIterator"])
    assert len(parsed["Records"]) == 2 and len(page) == 8 and page.subs == [*range(7), 0]
    _assert_parity(parsed, page, stream)


def test_an_empty_page_matches_botocore(server: tuple[LocalServer, Any]) -> None:
    local, streams = server
    stream = streams(shards=1)
    parsed, page = _both(local, stream, first_shard_iterator(local, stream, "LATEST"))
    assert parsed["Records"] == [] and len(page) == 0 and page.caught_up
    _assert_parity(parsed, page, stream)


def test_a_large_page_matches_botocore(kinesalite: LocalServer, lite_stream) -> None:
    """3,000 records of 1 to 2,000 bytes in one answer (kinesalite: kinesis-mock puts ~120 records/s)."""
    stream = lite_stream(shards=1)
    records = [(os.urandom(1 + (i * 37) % 2000), f"{UNICODE_KEYS[i % len(UNICODE_KEYS)]}-{i}") for i in range(3000)]
    put_records(kinesalite.client("kinesis"), stream, records)
    parsed, page = _both(kinesalite, stream, first_shard_iterator(kinesalite, stream))
    assert len(page) == len(parsed["Records"]) == 3000
    _assert_parity(parsed, page, stream)


def test_odd_records_match_botocore(server: tuple[LocalServer, Any]) -> None:
    """Empty data (a plain record, and user records of a KPL aggregate), the largest record Kinesis takes (data and
    partition key together 1 MiB) and the longest partition key (256 characters, 2-byte UTF-8 each)."""
    local, streams = server
    stream = streams(shards=1)
    kinesis = local.client("kinesis")
    aggregate = _aggregate([(b"", "empty-user"), (b"x", "é"), (b"", "日本")])
    put_records(kinesis, stream, [(b"", "empty"), (b"", UNICODE_KEYS[1]), aggregate, (b"long key", "é" * 256)])
    kinesis.put_record(StreamName=stream, Data=os.urandom(MAX_RECORD_BYTES - 1), PartitionKey="k")
    put_records(kinesis, stream, [(b"", "after the largest")])
    parsed, page = _both(local, stream, first_shard_iterator(local, stream))
    assert [len(record["Data"]) for record in parsed["Records"]] == [
        0,
        0,
        len(aggregate[0]),
        8,
        MAX_RECORD_BYTES - 1,
        0,
    ]
    assert [len(data) for data in page.data] == [0, 0, 0, 1, 0, 8, MAX_RECORD_BYTES - 1, 0]
    _assert_parity(parsed, page, stream)


def test_a_closed_shards_last_page_matches_botocore(server: tuple[LocalServer, Any]) -> None:
    """After a split, the parent's pages up to its end: the last one has no NextShardIterator (and ChildShards,
    which the decoder skips)."""
    local, streams = server
    stream = streams(shards=1)
    kinesis = local.client("kinesis")
    put_records(kinesis, stream, [(b"before the split", "k")])
    kinesis.split_shard(StreamName=stream, ShardToSplit=SHARD, NewStartingHashKey=str(MAX_HASH_KEY // 2 + 1))
    time.sleep(0.2)  # the split itself takes ~100 ms on the local servers
    wait_for_stream_active(kinesis, stream)
    reader = kinesis_reader_client(client_settings(local))
    iterator, pages = first_shard_iterator(local, stream), 0
    while iterator is not None and pages < 20:
        parsed, page = _one_body_both(local, stream, reader.get_records(ShardIterator=iterator)[RAW_BODY])
        _assert_parity(parsed, page, stream)
        iterator, pages = parsed.get("NextShardIterator"), pages + 1
    assert iterator is None and page.next_iterator is None


def test_answers_without_their_optional_fields_match_botocore(server: tuple[LocalServer, Any]) -> None:
    """A real answer with its optional fields taken out, one kind at a time, decoded by both from the same bytes:
    records without ApproximateArrivalTimestamp (or EncryptionType), an answer without MillisBehindLatest or
    NextShardIterator, one without Records, one whose Records is null."""
    local, streams = server
    stream = streams(shards=1)
    put_records(local.client("kinesis"), stream, [(f"r{i}".encode(), UNICODE_KEYS[i]) for i in range(4)])
    raw = kinesis_reader_client(client_settings(local)).get_records(ShardIterator=first_shard_iterator(local, stream))
    answer = json.loads(raw[RAW_BODY])
    assert len(answer["Records"]) == 4
    no_arrival = [
        {k: v for k, v in r.items() if k not in ("ApproximateArrivalTimestamp", "EncryptionType")}
        for r in answer["Records"]
    ]
    variants = [
        {**answer, "Records": no_arrival},
        {"Records": answer["Records"]},
        {"NextShardIterator": "it", "MillisBehindLatest": 5},
        {"Records": None, "NextShardIterator": None, "MillisBehindLatest": None},
    ]
    for variant in variants:
        parsed, page = _one_body_both(local, stream, json.dumps(variant).encode())
        _assert_parity(parsed, page, stream)
    shard = ShardContext(stream, SHARD, 0, MAX_HASH_KEY)
    assert page.arrivals_us == [] and decode_get_records(json.dumps(variants[0]), shard).arrivals_us == [None] * 4


def test_subscribe_to_shard_events_match_botocore(kinesis_mock: LocalServer, mock_stream) -> None:
    """Each SubscribeToShardEvent of one subscription (kinesis-mock), its payload parsed by botocore's event-stream
    parser and by ``decode_subscribe_event``: odd records, a KPL aggregate, the largest record."""
    stream = mock_stream(shards=1)
    consumer = active_consumer(kinesis_mock.endpoint_url, stream)
    kinesis = kinesis_mock.client("kinesis")
    aggregate = _aggregate([(f"user-{i}".encode() * i, UNICODE_KEYS[i % len(UNICODE_KEYS)]) for i in range(5)])
    put_records(
        kinesis, stream, [(b"", "empty"), *((os.urandom(i), key) for i, key in enumerate(UNICODE_KEYS)), aggregate]
    )
    kinesis.put_record(StreamName=stream, Data=os.urandom(MAX_RECORD_BYTES - 1), PartitionKey="k")
    _assert_subscription_parity(kinesis_mock, stream, consumer.arn, len(UNICODE_KEYS) + 3)


def _assert_subscription_parity(
    kinesis_mock: LocalServer, stream: str, consumer_arn: str, expected_records: int
) -> None:
    """Every event of a subscription from TRIM_HORIZON decodes as botocore parses it, until ``expected_records``."""
    client = kinesis_for_subscriptions(kinesis_mock.endpoint_url)
    shape = client.meta.service_model.operation_model("SubscribeToShard").output_shape.members["EventStream"]
    parser = botocore.parsers.EventStreamJSONParser()
    answer = client.subscribe_to_shard(
        ConsumerARN=consumer_arn, ShardId=SHARD, StartingPosition={"Type": "TRIM_HORIZON"}
    )
    raw, seen, events = answer[RAW_EVENT_STREAM], 0, 0
    try:
        buffer = EventStreamBuffer()
        for chunk in raw.stream(1 << 16):
            buffer.add_data(chunk)
            for message in buffer:
                if message.headers.get(":event-type") != "SubscribeToShardEvent":
                    continue
                parsed = parser.parse(message.to_response_dict(), shape)["SubscribeToShardEvent"]
                page = decode_subscribe_event(message.payload, ShardContext(stream, SHARD, 0, MAX_HASH_KEY))
                _assert_parity(parsed, page, stream, continuation="ContinuationSequenceNumber")
                seen, events = seen + len(parsed["Records"]), events + 1
            if seen >= expected_records:
                break
    finally:
        release(raw)
    assert seen == expected_records and events >= 1


def test_records_over_1_mib_on_a_raised_stream_match_botocore(kinesis_mock: LocalServer, mock_stream) -> None:
    """A stream raised to 3 MiB records (kinesis-mock): a 2.5 MiB record and a 1.2 MiB KPL aggregate, read by
    GetRecords and by a subscription."""
    stream = mock_stream(shards=1)
    kinesis = kinesis_mock.client("kinesis")
    set_max_record_size(kinesis, stream, 3072)
    consumer = active_consumer(kinesis_mock.endpoint_url, stream)
    large_aggregate = AggRecord(3 * 1024 * 1024)  # aws-kinesis-agg's RecordAggregator stops at 1 MiB
    for data, key in [(os.urandom(600 * 1024), "a"), (os.urandom(600 * 1024), "b")]:
        large_aggregate.add_user_record(key, data)
    key, _, data = large_aggregate.get_contents()
    put_records(kinesis, stream, [(os.urandom(2560 * 1024), "large"), (data, key), (b"small", "k")])
    parsed, page = _both(kinesis_mock, stream, first_shard_iterator(kinesis_mock, stream))
    assert [len(data) for data in page.data] == [2560 * 1024, 600 * 1024, 600 * 1024, 5]
    _assert_parity(parsed, page, stream)
    _assert_subscription_parity(kinesis_mock, stream, consumer.arn, 3)
