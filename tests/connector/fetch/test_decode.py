"""The fast decode path (``pyspark_aws_kinesis.fetch.decode``): GetRecords bodies from a real server and
SubscribeToShard events, decoded into pages and Arrow batches, against botocore's parse of the same answer; KPL
aggregates unpacked, malformed answers refused, the binary columns built as pyarrow builds them."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
from aws_kinesis_agg.aggregator import RecordAggregator
from botocore.exceptions import ClientError

from localaws import LocalServer
from localaws.streams import put_records
from pyspark_aws_kinesis.aws.clients import RAW_BODY, kinesis_client, kinesis_reader_client
from pyspark_aws_kinesis.fetch import decode
from pyspark_aws_kinesis.fetch.decode import (
    ARROW_SCHEMA,
    MalformedAnswerError,
    ShardContext,
    decode_get_records,
    decode_subscribe_event,
    summarize_get_records,
)
from pyspark_aws_kinesis.kpl import Aggregator, hash_key_of
from pyspark_aws_kinesis.shards import MAX_HASH_KEY
from tests.connector.support.efo_util import SHARD0
from tests.connector.support.source_util import client_settings, first_shard_iterator


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


def _body(records: list[tuple[bytes, str, float | None]]) -> bytes:
    """A GetRecords answer of plain records (data, partition key, arrival in epoch seconds or None)."""
    wire = []
    for index, (data, key, arrival) in enumerate(records):
        record = {"Data": base64.b64encode(data).decode(), "PartitionKey": key, "SequenceNumber": str(100 + index)}
        if arrival is not None:
            record["ApproximateArrivalTimestamp"] = arrival
        wire.append(record)
    return json.dumps({"Records": wire, "NextShardIterator": "it", "MillisBehindLatest": 0}).encode()


def test_a_batch_of_a_decoded_page_takes_its_string_columns_from_the_decode(monkeypatch: pytest.MonkeyPatch) -> None:
    """The decode builds the partition key and sequence number columns right after their lists (while the strings
    are in cache), and ``to_batch`` slices them; a list changed since is built again."""
    shard = ShardContext("s", "shardId-0", 0, MAX_HASH_KEY)
    page = decode_get_records(_body([(b"x", "k0", 1.0), (b"y", "ключ", 2.0), (b"z", "k2", None)]), shard)
    built: list[list[str]] = []
    monkeypatch.setattr(decode, "_string_array", lambda values: built.append(values) or pa.array(values, pa.string()))
    batch = page.to_batch(shard, 1, 3)
    assert built == [] and batch.column("partitionKey").to_pylist() == ["ключ", "k2"]
    assert batch.column("sequenceNumber").to_pylist() == ["101", "102"]
    page.keys = ["a", "b", "c"]
    assert page.to_batch(shard, 0, 3).column("partitionKey").to_pylist() == ["a", "b", "c"] and built == [
        ["a", "b", "c"]
    ]


def test_constant_columns_are_slices_of_one_kept_per_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch's stream name, shard id and sub-sequence columns are slices of one column kept per value (built again
    only when a longer one is asked for), and the kept columns are bounded."""
    monkeypatch.setattr(decode, "_constant_columns", {})
    first = decode.constant_column("shardId-7", pa.string(), 5)
    shorter = decode.constant_column("shardId-7", pa.string(), 3)
    assert shorter.to_pylist() == ["shardId-7"] * 3 and shorter.buffers()[2].address == first.buffers()[2].address
    longer = decode.constant_column("shardId-7", pa.string(), 8)
    assert longer.to_pylist() == ["shardId-7"] * 8 and len(decode.constant_column("shardId-7", pa.string(), 0)) == 0
    zeros = decode.constant_column(0, pa.int64(), 4)
    assert zeros.type == pa.int64() and zeros.to_pylist() == [0] * 4
    shard = ShardContext("s", "shardId-7", 0, MAX_HASH_KEY)
    batches = [decode_get_records(_body([(b"x", "k", 1.0)] * n), shard).to_batch(shard, 0, n) for n in (2, 1)]
    for name in ("streamName", "shardId", "subSequenceNumber"):
        buffers = [batch.column(name).buffers()[-1].address for batch in batches]
        assert buffers[0] == buffers[1], name
    assert batches[1].column("shardId").to_pylist() == ["shardId-7"]
    for index in range(2 * decode._CONSTANTS_KEPT):
        decode.constant_column(f"shardId-{index}", pa.string(), 1)
    assert len(decode._constant_columns) <= decode._CONSTANTS_KEPT


def test_a_batch_of_a_plain_page_holds_the_rows_asked_for() -> None:
    """Rows ``start:stop`` of a decoded page (the columns the decode kept are sliced), arrival None included."""
    rows = [(b"a" * 300, "k0", 1700000000.001), (b"", "ключ", None), (b"c" * 5, "k2", 1700000000.5), (b"d", "k3", 1.0)]
    shard = ShardContext("s", "shardId-0", 0, MAX_HASH_KEY)
    page = decode_get_records(_body(rows), shard)
    batch = page.to_batch(shard, 1, 3)
    assert batch.schema == ARROW_SCHEMA
    assert batch.column("data").to_pylist() == [b"", b"c" * 5]
    assert batch.column("partitionKey").to_pylist() == ["ключ", "k2"]
    assert batch.column("sequenceNumber").to_pylist() == ["101", "102"]
    assert batch.column("subSequenceNumber").to_pylist() == [0, 0]
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    assert batch.column("approximateArrivalTimestamp").to_pylist() == [None, epoch + timedelta(seconds=1700000000.5)]


def test_a_batch_follows_page_lists_changed_after_the_decode() -> None:
    """The columns a decode keeps for ``to_batch`` give way to the lists as soon as a field holds another list
    (or the same list grew): a batch always shows the page's lists."""
    shard = ShardContext("s", "shardId-0", 0, MAX_HASH_KEY)
    page = decode_get_records(_body([(b"x", "k", 1.0), (b"y", "k", 2.0)]), shard)
    page.arrivals_us = [7, None]
    page.subs = [3, 4]
    batch = page.to_batch(shard, 0, 2)
    assert batch.column("approximateArrivalTimestamp").cast(pa.int64()).to_pylist() == [7, None]
    assert batch.column("subSequenceNumber").to_pylist() == [3, 4]
    grown = decode_get_records(_body([(b"x", "k", 1.0)]), shard)
    for name, value in [("data", b"z"), ("keys", "k"), ("sequences", "9"), ("subs", 5), ("arrivals_us", 8000)]:
        getattr(grown, name).append(value)
    grown.record_ends.append(True)
    batch = grown.to_batch(shard, 0, 2)
    assert batch.column("data").to_pylist() == [b"x", b"z"]
    assert batch.column("subSequenceNumber").to_pylist() == [0, 5]
    assert batch.column("approximateArrivalTimestamp").cast(pa.int64()).to_pylist() == [1_000_000, 8000]
    cut = replace(page, subs=[1, 2])  # a new page from a decoded one starts without its kept columns
    assert cut.to_batch(shard, 0, 2).column("subSequenceNumber").to_pylist() == [1, 2]


def test_the_quota_bytes_count_data_and_partition_keys_in_utf8() -> None:
    """``kinesis_bytes`` of a plain page and of one with an aggregate: data plus each partition key's UTF-8 bytes."""
    shard = ShardContext("s", "shardId-0", 0, MAX_HASH_KEY)
    plain = [(b"abc", "ключ", 1.0), (b"", "日本語キー", 2.0), (b"d" * 1000, "k", None)]
    want = sum(len(data) + len(key.encode()) for data, key, _ in plain)
    assert decode_get_records(_body(plain), shard).kinesis_bytes == want
    aggregator = Aggregator()
    for index in range(3):
        aggregator.add(f"u{index}".encode(), "é")
    aggregate = aggregator.flush()
    assert aggregate is not None and aggregate.user_records == 3
    mixed = decode_get_records(_body([*plain, (aggregate.data, aggregate.partition_key, 3.0)]), shard)
    assert len(mixed) == 6 and mixed.kinesis_bytes == want + len(aggregate.data) + len("é".encode())


def test_decode_subscribe_event_keeps_continuation_and_unpacks_aggregates() -> None:
    aggregator = Aggregator()
    for i in range(3):
        aggregator.add(f"u{i}".encode(), f"k{i}")
    aggregate = aggregator.flush()
    assert aggregate is not None
    import base64
    import json

    def record(payload: bytes, sequence: str) -> dict:
        return {
            "Data": base64.b64encode(payload).decode(),
            "PartitionKey": "pk",
            "SequenceNumber": sequence,
            "ApproximateArrivalTimestamp": 1700000000.5,
        }

    event = {
        "Records": [record(b"plain", "1"), record(aggregate.data, "2")],
        "ContinuationSequenceNumber": "2",
        "MillisBehindLatest": 7,
    }
    shard = ShardContext("s", SHARD0, 0, 2**128 - 1)
    page = decode_subscribe_event(json.dumps(event).encode(), shard)
    assert page.data == [b"plain", b"u0", b"u1", b"u2"]
    assert page.sequences == ["1", "2", "2", "2"] and page.subs == [0, 0, 1, 2]
    assert page.record_ends == [True, False, False, True]
    assert page.arrivals_us == [1700000000500000] * 4
    assert (page.next_iterator, page.millis_behind_latest, page.kinesis_records, page.caught_up) == ("2", 7, 2, False)
    raw = decode_subscribe_event(json.dumps(event).encode(), ShardContext("s", SHARD0, 0, 2**128 - 1, False))
    assert raw.data == [b"plain", aggregate.data] and raw.subs == [0, 0]
    end = decode_subscribe_event(b'{"Records": [], "ContinuationSequenceNumber": null, "MillisBehindLatest": 0}', shard)
    assert end.next_iterator is None and end.caught_up


def test_subscribe_events_and_get_records_answers_decode_to_the_same_page() -> None:
    import base64
    import json

    aggregator = Aggregator()
    aggregator.add(b"in", "k0", explicit_hash_key=str(10))
    aggregator.add(b"out", "k1", explicit_hash_key=str(2**127))  # outside the shard's range below: dropped
    aggregate = aggregator.flush()
    assert aggregate is not None
    records = [
        {"Data": base64.b64encode(data).decode(), "PartitionKey": "pk", "SequenceNumber": seq}
        for data, seq in ((b"plain", "11"), (aggregate.data, "12"))
    ]
    shard = ShardContext("s", SHARD0, 0, 2**127 - 1)
    polled = decode_get_records(
        json.dumps({"Records": records, "NextShardIterator": "it", "MillisBehindLatest": 3}), shard
    )
    pushed = decode_subscribe_event(
        json.dumps({"Records": records, "ContinuationSequenceNumber": "12", "MillisBehindLatest": 3}), shard
    )
    assert (pushed.last_sequence, pushed.dropped_out_of_range) == ("12", 1)
    assert {**vars(pushed), "next_iterator": None} == {**vars(polled), "next_iterator": None}


def test_a_pages_large_records_are_those_over_1_mib_told_by_the_kept_column_when_none_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """(count, bytes) of the records over 1 MiB; a page over 1 MiB in all without one is told by the data column
    the decode kept, not by a walk of the records in Python."""
    shard = ShardContext("s", "shardId-0", 0, MAX_HASH_KEY)
    mixed = decode_get_records(_body([(b"x" * (2 << 20), "k", 1.0), (b"y" * 1024, "k", 1.0)]), shard)
    assert mixed.large_records() == (1, 2 << 20)
    small = decode_get_records(_body([(b"z" * 1024, "k", 1.0)] * 1100), shard)
    monkeypatch.setattr(decode, "large_records", lambda *args: pytest.fail("walked in Python"))
    assert small.kinesis_bytes > 1 << 20 and small.large_records() == (0, 0)


@pytest.mark.parametrize(
    "records",
    [
        [],
        [(b"one", "k", 1795900000.123)],
        [(b"x" * 10, "clé-ü", None), (b"y", "k", 2.5)],  # a key of multi-byte characters; no arrival first
        [(b"x" * (2 << 20), "k", 1.0), (b"y" * 1024, "k", 1.0), (b"z" * (3 << 20), "kk", 1.0)],
        [(b"z" * 1024, "k", 1.0)] * 1100,  # over 1 MiB in all, none over 1 MiB alone
    ],
    ids=["empty", "one", "utf8-key", "large", "many"],
)
def test_an_answers_summary_says_what_its_page_says(records: list[tuple[bytes, str, float | None]]) -> None:
    """The probe's summary (no columns) agrees with the page the same body decodes to, records and all."""
    body, shard = _body(records), ShardContext("s", "shardId-0", 0, MAX_HASH_KEY, deaggregate=False)
    page, summary = decode_get_records(body, shard), summarize_get_records(body, shard)
    assert (summary.kinesis_records, summary.kinesis_bytes) == (page.kinesis_records, page.kinesis_bytes)
    assert summary.large == page.large_records()
    assert summary.first_arrival_us == (page.arrivals_us[0] if records else None)
    assert (summary.next_iterator, summary.millis_behind_latest) == (page.next_iterator, page.millis_behind_latest)


def test_a_kpl_answers_summary_counts_its_aggregates_not_their_user_records() -> None:
    aggregator = Aggregator()
    for index in range(5):
        aggregator.add(f"u{index}".encode(), "k")
    aggregate = aggregator.flush()
    assert aggregate is not None
    body, shard = _body([(aggregate.data, "k", 3.0)]), ShardContext("s", "shardId-0", 0, MAX_HASH_KEY)
    summary = summarize_get_records(body, shard)
    assert (summary.kinesis_records, summary.kinesis_bytes) == (1, len(aggregate.data) + 1)
    assert (summary.kinesis_records, summary.kinesis_bytes) == (1, decode_get_records(body, shard).kinesis_bytes)
