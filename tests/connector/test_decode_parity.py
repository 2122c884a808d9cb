"""Parity of ``connector.fetch.decode`` with botocore's own parser, on real kinesalite and kinesis-mock answers.

The same GetRecords iterator is read twice: by a plain client (botocore parses the body) and by the reader client
(``connector.fetch.decode`` decodes the raw body). The expected user records come from botocore's parse,
de-aggregated by aws-kinesis-agg's own deaggregator (an implementation independent of ``connector.kpl``): every Page
field the range rules use, and the Arrow batch, must agree. Cases: every base64 padding length, unicode partition
keys, a KPL aggregate with unicode keys, a large record, a large page, an empty page; arrival timestamps throughout.
"""

from __future__ import annotations

import base64
import os
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest
from aws_kinesis_agg.aggregator import RecordAggregator
from aws_kinesis_agg.deaggregator import iter_deaggregate_records
from source_util import client_settings, first_shard_iterator

from connector.aws.clients import RAW_BODY, kinesis_client, kinesis_reader_client
from connector.fetch.decode import ARROW_SCHEMA, Page, ShardContext, decode_get_records
from connector.shards import MAX_HASH_KEY
from localaws import LocalServer
from localaws.streams import put_records

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


def _expected_rows(records: list[dict[str, Any]]) -> list[tuple[bytes, str, str, int, int, bool]]:
    """(data, key, sequence, sub-sequence, arrival µs, last of its record) per user record, by aws-kinesis-agg."""
    rows = []
    for record in records:
        arrival = (record["ApproximateArrivalTimestamp"] - EPOCH) // timedelta(microseconds=1)
        lambda_style = {
            "kinesis": {
                "data": base64.b64encode(record["Data"]).decode(),
                "partitionKey": record["PartitionKey"],
                "sequenceNumber": record["SequenceNumber"],
                "kinesisSchemaVersion": "1.0",
                "approximateArrivalTimestamp": arrival,
            }
        }
        users = [user["kinesis"] for user in iter_deaggregate_records(lambda_style)]
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


def _assert_parity(parsed: dict[str, Any], page: Page, stream: str) -> None:
    records = parsed["Records"]
    expected = _expected_rows(records)
    columns = list(
        zip(page.data, page.keys, page.sequences, page.subs, page.arrivals_us, page.record_ends, strict=True)
    )
    assert columns == expected
    assert page.kinesis_records == len(records)
    assert page.last_sequence == (records[-1]["SequenceNumber"] if records else None)
    assert page.millis_behind_latest == parsed["MillisBehindLatest"]
    assert (page.next_iterator is None) == (parsed.get("NextShardIterator") is None)  # iterators differ per call
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
                [EPOCH + timedelta(microseconds=row[4]) for row in expected], pa.timestamp("us", tz="UTC")
            ),
        }
    )
    assert pa.Table.from_batches([batch]).select(want.column_names).equals(want)
    assert set(batch.column("streamName").to_pylist()) <= {stream}
    assert set(batch.column("shardId").to_pylist()) <= {SHARD}


def test_plain_and_aggregated_records_match_botocore(server: tuple[LocalServer, Any]) -> None:
    """A page of plain records (every base64 padding, unicode keys, a 600 KB record), then a page holding a KPL
    aggregate (unicode keys and data) and a plain record: the two ways ``connector.fetch.decode`` builds a Page."""
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
