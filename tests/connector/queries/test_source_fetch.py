"""Reading shards without Spark: KPL aggregates from aws-kinesis-agg (sub-sequence numbers, resuming inside an
aggregate, hash-key filtering, corrupt aggregates), and a closed shard read to its end on kinesis-mock."""

from __future__ import annotations

import hashlib
import logging
import time

import pytest
from aws_kinesis_agg.aggregator import RecordAggregator

from localaws import LocalServer
from localaws.streams import put_records, wait_for_stream_active
from pyspark_aws_kinesis.fetch.decode import CorruptAggregateError
from pyspark_aws_kinesis.kpl import MAGIC
from pyspark_aws_kinesis.positions import SHARD_END
from pyspark_aws_kinesis.shards import list_shards
from pyspark_aws_kinesis.source.offsets import parse_offset
from tests.connector.support.source_util import next_batch, payloads, reader, roundtrip, run_batch, source_options


def _aggregate(records: list[tuple[str, bytes, str | None]]) -> tuple[str, str | None, bytes]:
    """One aggregate of (partition key, data, explicit hash key) made by aws-kinesis-agg."""
    aggregator = RecordAggregator()
    for key, data, explicit in records:
        assert aggregator.add_user_record(key, data, explicit) is None  # everything fits in one aggregate
    return aggregator.clear_and_get().get_contents()


def _put_raw(kinesis, stream: str, data: bytes, key: str, explicit: str | None = None) -> None:
    entry = {"Data": data, "PartitionKey": key, **({"ExplicitHashKey": explicit} if explicit else {})}
    answer = kinesis.put_records(StreamName=stream, Records=[entry])
    assert answer["FailedRecordCount"] == 0


def test_aggregates_become_user_records_and_batches_resume_inside_them(
    kinesalite: LocalServer, lite_stream, tmp_path
) -> None:
    stream = lite_stream(shards=1)
    kinesis = kinesalite.client("kinesis")
    expected: list[tuple[bytes, str, int]] = []
    for round_, size in enumerate((1, 10, 1, 7)):
        users = [(f"pk-{round_}-{i}", f"user-{round_}-{i}".encode(), None) for i in range(size)]
        if size == 1:
            _put_raw(kinesis, stream, users[0][1], users[0][0])
        else:
            key, explicit, data = _aggregate(users)
            _put_raw(kinesis, stream, data, key, explicit)
        expected += [(data, key, sub if size > 1 else 0) for sub, (key, data, _e) in enumerate(users)]
    source = reader(source_options(kinesalite, stream, tmp_path, **{"kinesis.maxFetchRecordsPerShard": "3"}))
    start = roundtrip(source.initialOffset())
    rows = []
    for _ in range(8):  # 19 user records, 3 per batch: batches stop inside aggregates
        start, batch = run_batch(source, start)
        assert len(batch) <= 3
        rows += batch
    assert [(bytes(r["data"]), r["partitionKey"], r["subSequenceNumber"]) for r in rows] == expected
    assert len({(r["sequenceNumber"], r["subSequenceNumber"]) for r in rows}) == 19


def test_sub_records_outside_the_shards_hash_range_are_dropped_and_reported(
    kinesalite: LocalServer, lite_stream, tmp_path, caplog
) -> None:
    stream = lite_stream(shards=2)
    kinesis = kinesalite.client("kinesis")
    low, high = sorted(list_shards(kinesis, stream), key=lambda shard: shard.starting_hash_key)
    inside, outside = str(low.starting_hash_key + 5), str(high.starting_hash_key + 5)
    users = [("a", b"in-0", inside), ("b", b"out-1", outside), ("c", b"in-2", inside), ("d", b"out-3", outside)]
    key, _explicit, data = _aggregate(users)
    _put_raw(kinesis, stream, data, key, inside)  # the whole aggregate lands on the low shard
    source = reader(source_options(kinesalite, stream, tmp_path))
    end, rows = run_batch(source, roundtrip(source.initialOffset()))
    assert [(bytes(r["data"]), r["subSequenceNumber"], r["shardId"]) for r in rows] == [
        (b"in-0", 0, low.shard_id),
        (b"in-2", 2, low.shard_id),
    ]
    # The executor counted the drops in its record; the driver logs them and reports them in the progress.
    with caplog.at_level(logging.WARNING, logger="pyspark_aws_kinesis.source.health"):
        source.latestOffset(end, None)
    assert "dropped 2 KPL sub-records" in caplog.text
    assert source.reportLatestOffset()["recordsDroppedOutOfRange"] == 2


def _corrupt_aggregate() -> bytes:
    _key, _explicit, data = _aggregate([("a", b"x", None), ("b", b"y", None)])
    body = data[len(MAGIC) : -16]
    return MAGIC + body + hashlib.md5(body + b"tampered").digest()


def test_a_corrupt_aggregate_fails_clearly_by_default(kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    stream = lite_stream(shards=1)
    _put_raw(kinesalite.client("kinesis"), stream, _corrupt_aggregate(), "k")
    source = reader(source_options(kinesalite, stream, tmp_path))
    with pytest.raises(CorruptAggregateError, match=r"bad MD5.*kinesis.kpl.passThroughCorruptAggregates=true"):
        run_batch(source, roundtrip(source.initialOffset()))


def test_a_corrupt_aggregate_passes_through_with_the_option(kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    stream = lite_stream(shards=1)
    corrupt = _corrupt_aggregate()
    _put_raw(kinesalite.client("kinesis"), stream, corrupt, "k")
    options = source_options(kinesalite, stream, tmp_path, **{"kinesis.kpl.passThroughCorruptAggregates": "true"})
    source = reader(options)
    _end, rows = run_batch(source, roundtrip(source.initialOffset()))
    assert [(bytes(r["data"]), r["subSequenceNumber"]) for r in rows] == [(corrupt, 0)]


def test_deaggregation_can_be_turned_off(kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    stream = lite_stream(shards=1)
    key, explicit, data = _aggregate([("a", b"x", None), ("b", b"y", None)])
    _put_raw(kinesalite.client("kinesis"), stream, data, key, explicit)
    source = reader(source_options(kinesalite, stream, tmp_path, **{"kinesis.kpl.deaggregate": "false"}))
    _end, rows = run_batch(source, roundtrip(source.initialOffset()))
    assert payloads(rows) == [data]


def test_a_closed_shard_is_read_to_its_end_then_dropped(kinesis_mock: LocalServer, mock_stream, tmp_path) -> None:
    stream = mock_stream(shards=1)
    kinesis = kinesis_mock.client("kinesis")
    put_records(kinesis, stream, [(f"parent-{i}".encode(), f"k{i}") for i in range(3)])
    (parent,) = list_shards(kinesis, stream)
    middle = str((parent.starting_hash_key + parent.ending_hash_key) // 2)
    kinesis.split_shard(StreamName=stream, ShardToSplit=parent.shard_id, NewStartingHashKey=middle)
    time.sleep(0.2)  # the split takes 100 ms on our kinesis-mock
    wait_for_stream_active(kinesis, stream)
    put_records(kinesis, stream, [(f"child-{i}".encode(), f"k{i}") for i in range(4)])
    source = reader(source_options(kinesis_mock, stream, tmp_path))
    start = roundtrip(source.initialOffset())
    assert len(parse_offset(start).shards) == 3
    start, rows = run_batch(source, start)
    planned = parse_offset(start)
    assert list(planned.active()) == [f"{stream}/{parent.shard_id}"]  # children wait for their parent's end
    assert sorted(payloads(rows)) == [f"parent-{i}".encode() for i in range(3)]
    start, rows = next_batch(source, start)
    after = parse_offset(start)
    assert after.shards[f"{stream}/{parent.shard_id}"].kind == SHARD_END
    assert len(after.active()) == 2  # the children, now that the parent is finished
    assert sorted(payloads(rows)) == sorted(f"child-{i}".encode() for i in range(4))
