"""The fast decode path: GetRecords bodies from a real server, decoded by pyspark_aws_kinesis.fetch.decode, against
botocore's parse of the same answer; the reader client keeps botocore's errors."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest
from aws_kinesis_agg.aggregator import RecordAggregator
from botocore.exceptions import ClientError
from source_util import client_settings, first_shard_iterator

from localaws import LocalServer
from localaws.streams import put_records
from pyspark_aws_kinesis.aws.clients import RAW_BODY, kinesis_client, kinesis_reader_client
from pyspark_aws_kinesis.fetch.decode import (
    ARROW_SCHEMA,
    MalformedAnswerError,
    ShardContext,
    decode_get_records,
    decode_subscribe_event,
)
from pyspark_aws_kinesis.kpl import Aggregator, hash_key_of
from pyspark_aws_kinesis.shards import MAX_HASH_KEY


def test_decoded_rows_match_botocores_parse_of_the_same_answer(kinesalite: LocalServer, lite_stream) -> None:
    stream = lite_stream(shards=1)
    put_records(kinesalite.client("kinesis"), stream, [(bytes([i % 256]) * (i + 1), f"key-{i}") for i in range(300)])
    iterator = first_shard_iterator(kinesalite, stream)
    settings = client_settings(kinesalite)
    parsed = kinesis_client(settings).get_records(ShardIterator=iterator)
    raw = kinesis_reader_client(settings).get_records(ShardIterator=iterator)
    assert set(raw) == {RAW_BODY, "ResponseMetadata"}  # botocore parsed nothing of the body
    shard = ShardContext(stream, "shardId-000000000000", 0, MAX_HASH_KEY)
    page = decode_get_records(raw[RAW_BODY], shard)
    records = parsed["Records"]
    assert len(page) == page.kinesis_records == len(records) == 300
    assert page.data == [record["Data"] for record in records]
    assert page.keys == [record["PartitionKey"] for record in records]
    assert page.sequences == [record["SequenceNumber"] for record in records]
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    micro = timedelta(microseconds=1)
    assert page.arrivals_us == [(r["ApproximateArrivalTimestamp"] - epoch) // micro for r in records]
    assert page.subs == [0] * 300 and all(page.record_ends)
    assert page.millis_behind_latest == parsed["MillisBehindLatest"]
    assert (page.next_iterator is None) == (parsed.get("NextShardIterator") is None)
    batch = page.to_batch(shard, 10, 20)
    assert batch.schema == ARROW_SCHEMA and batch.num_rows == 10
    assert batch.column("data").to_pylist() == page.data[10:20]


def test_aggregates_in_a_raw_body_become_user_records(kinesalite: LocalServer, lite_stream) -> None:
    stream = lite_stream(shards=1)
    aggregator = RecordAggregator()
    for i in range(5):
        aggregator.add_user_record(f"pk-{i}", f"user-{i}".encode())
    key, _explicit, data = aggregator.clear_and_get().get_contents()
    put_records(kinesalite.client("kinesis"), stream, [(b"plain", "p"), (data, key)])
    raw = kinesis_reader_client(client_settings(kinesalite)).get_records(
        ShardIterator=first_shard_iterator(kinesalite, stream)
    )
    page = decode_get_records(raw[RAW_BODY], ShardContext(stream, "shardId-000000000000", 0, MAX_HASH_KEY))
    assert page.kinesis_records == 2
    assert page.data == [b"plain"] + [f"user-{i}".encode() for i in range(5)]
    assert page.subs == [0, 0, 1, 2, 3, 4]
    assert page.record_ends == [True, False, False, False, False, True]
    assert len(set(page.sequences[1:])) == 1


def test_the_reader_client_still_raises_aws_errors(kinesalite: LocalServer) -> None:
    with pytest.raises(ClientError) as failure:
        kinesis_reader_client(client_settings(kinesalite)).get_records(ShardIterator="not-an-iterator" * 2)
    assert failure.value.response["Error"]["Code"] in ("InvalidArgumentException", "ValidationException")


@pytest.mark.parametrize(
    ("body", "what"),
    [
        (b'{"Records": [{"Data": "@@", "PartitionKey": "k", "SequenceNumber": "1"}]}', "Invalid base64"),
        (b'{"Records": [{"Data": "aGk=", "SequenceNumber": "1"}]}', "missing required field `PartitionKey`"),
        (b'{"Records": [', "truncated"),
    ],
)
def test_a_malformed_answer_names_the_shard_and_what_is_wrong(body: bytes, what: str) -> None:
    """botocore would read "@@" as empty data (its base64 ignores what is not base64); we refuse it."""
    shard = ShardContext("orders", "shardId-000000000007", 0, MAX_HASH_KEY)
    with pytest.raises(MalformedAnswerError, match=rf"GetRecords answer from .*orders.*shardId-000000000007.*{what}"):
        decode_get_records(body, shard)
    with pytest.raises(MalformedAnswerError, match=rf"SubscribeToShardEvent from .*shardId-000000000007.*{what}"):
        decode_subscribe_event(body, shard)


def test_aggregates_keep_only_the_user_records_of_the_shards_hash_range() -> None:
    """Keys repeat through an aggregate's key table (each distinct key is judged once); explicit hash keys decide
    over partition keys; a shard holding every hash key keeps all."""
    aggregator = Aggregator()
    half = 2**127
    # one partition key throughout: a verdict kept per partition key alone would be wrong
    keys = [("k", str(half - 1)), ("k", str(half)), ("k", str(half - 1)), ("k", None), ("k", str(half))]
    for index, (key, explicit) in enumerate(keys):
        aggregator.add(f"u{index}".encode(), key, explicit_hash_key=explicit)
    aggregate = aggregator.flush()
    assert aggregate is not None and aggregate.user_records == 5
    pk_inside = hash_key_of("k") < half
    record = {"Data": base64.b64encode(aggregate.data).decode(), "PartitionKey": "k", "SequenceNumber": "5"}
    body = json.dumps({"Records": [record], "NextShardIterator": "it", "MillisBehindLatest": 0})
    lower = decode_get_records(body, ShardContext("s", "shardId-0", 0, half - 1))
    upper = decode_get_records(body, ShardContext("s", "shardId-1", half, MAX_HASH_KEY - 1))
    assert lower.subs == [0, 2, 3] if pk_inside else [0, 2]
    assert upper.subs == [1, 4] if pk_inside else [1, 3, 4]
    assert lower.dropped_out_of_range + upper.dropped_out_of_range == 5
    assert [lower.data[i] for i in range(len(lower))] == [f"u{sub}".encode() for sub in lower.subs]
    assert lower.record_ends[-1] and not any(lower.record_ends[:-1]) and lower.sequences == ["5"] * len(lower)
    everything = decode_get_records(body, ShardContext("s", "shardId-0", 0, MAX_HASH_KEY))
    assert everything.subs == [0, 1, 2, 3, 4] and everything.dropped_out_of_range == 0
