"""The sink across a reshard: an aggregate that a split puts on a shard whose hash-key range does not hold all of
its user records has those records sent again, so every reader that drops out-of-range sub-records (ours, the
KCL, aws-kinesis-agg's deaggregator with the KCL's rule) still sees each of them, once.

The split happens on kinesis-mock between the task's ListShards and its PutRecords: the test wraps the task's
``open_shard_router`` so that the first listing is followed by a split, as if another client resharded then.
"""

from __future__ import annotations

import base64
import logging
import time
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from aws_kinesis_agg.deaggregator import deaggregate_records
from pyspark.sql.types import BinaryType, StringType, StructField, StructType
from source_util import source_options

import pyspark_aws_kinesis.sink.task as task
from localaws import LocalServer
from localaws.streams import iterate_shard, wait_for_stream_active
from pyspark_aws_kinesis.kpl import hash_key_of, is_aggregated
from pyspark_aws_kinesis.shards import MAX_HASH_KEY, Shard, list_shards, open_shards
from pyspark_aws_kinesis.sink import KinesisBatchWriter
from pyspark_aws_kinesis.sink.commit import SinkCommitMessage, summarize
from pyspark_aws_kinesis.sink.planning import AggregateEntry, misplaced_records, moved_aggregates, plan_aggregated
from pyspark_aws_kinesis.sink.put_records import PutStats
from pyspark_aws_kinesis.sink.routing import ShardRouter

MIDDLE = 2**127
SCHEMA = StructType([StructField("data", BinaryType()), StructField("partitionKey", StringType())])


def rows(count: int) -> list[tuple[bytes, str]]:
    return [(f"row-{i}".encode(), f"key-{i}") for i in range(count)]


# --- the landing check, on a fake PutRecords answer -------------------------------------------------------


def _shard(name: str, low: int, high: int, closed: bool = False) -> Shard:
    return Shard(name, None, None, low, high, "0", "9" if closed else None)


PARENT = _shard("parent", 0, MAX_HASH_KEY)
LOW, HIGH = _shard("low", 0, MIDDLE - 1), _shard("high", MIDDLE, MAX_HASH_KEY)
SPLIT = ShardRouter([_shard("parent", 0, MAX_HASH_KEY, closed=True), LOW, HIGH])


def test_only_the_records_outside_the_landed_shard_are_misplaced() -> None:
    records = rows(200)
    planned = plan_aggregated(
        [d for d, _ in records], [k for _, k in records], [None] * 200, ShardRouter([PARENT]), lanes=1
    )
    (aggregate,) = planned.lanes[0]
    assert isinstance(aggregate, AggregateEntry) and aggregate.shard_id == "parent"
    assert moved_aggregates([(aggregate, "parent")]) == []  # landed where planned: nothing to check
    moved = moved_aggregates([(aggregate, "low")])  # the answer names a child of a split since the listing
    misplaced = misplaced_records(moved, SPLIT)
    expected = sorted(data for data, key in records if hash_key_of(key) >= MIDDLE)
    assert 0 < len(expected) < 200
    assert sorted(record.data for record in misplaced) == expected
    # An aggregate whose records all hash into the child it landed on (or into a merged shard) stays as it is.
    low_only = [(data, key) for data, key in records if hash_key_of(key) < MIDDLE]
    (held,) = plan_aggregated(
        [d for d, _ in low_only], [k for _, k in low_only], [None] * len(low_only), ShardRouter([PARENT]), lanes=1
    ).lanes[0]
    assert misplaced_records(moved_aggregates([(held, "low")]), SPLIT) == []
    # A shard the listing does not show holds nothing we can vouch for: all its records go again.
    assert len(misplaced_records(moved_aggregates([(aggregate, "unlisted")]), SPLIT)) == 200


def test_the_commit_message_counts_and_describes_re_sent_records() -> None:
    messages = [
        SinkCommitMessage(0, ("s",), user_records=10, aggregates=1, resent_records=4, put=PutStats(records=2)),
        SinkCommitMessage(1, ("s",), user_records=5, aggregates=1, resent_records=1, put=PutStats(records=1)),
        None,
    ]
    total, tasks = summarize(messages)
    assert (tasks, total.user_records, total.resent_records) == (2, 15, 5)
    assert "5 records re-sent after their aggregates landed on a shard that does not hold them" in total.describe()
    assert "re-sent" not in SinkCommitMessage(0, ("s",), user_records=1).describe()


# --- a real split between listing and writing on kinesis-mock -----------------------------------------------


def split_after_listing(monkeypatch, kinesis: Any, stream: str, stale_forever: bool = False) -> list[ShardRouter]:
    """Make the task's first ListShards be followed by a split of the stream's one shard at MIDDLE.

    Returns the routers handed to the task. ``stale_forever``: every later listing is the pre-split one too.
    """
    listed = task.open_shard_router
    handed: list[ShardRouter] = []

    def listing_then_split(client, stream_name: str, settings) -> ShardRouter:
        if handed and not stale_forever:
            router = listed(client, stream_name, settings)
        elif handed:
            router = handed[0]
        else:
            router = listed(client, stream_name, settings)
            (parent,) = open_shards(list_shards(kinesis, stream))
            kinesis.split_shard(StreamName=stream, ShardToSplit=parent.shard_id, NewStartingHashKey=str(MIDDLE))
            time.sleep(0.2)  # kinesis-mock takes 100 ms and reports ACTIVE before it starts
            wait_for_stream_active(kinesis, stream)
        handed.append(router)
        return router

    monkeypatch.setattr(task, "open_shard_router", listing_then_split)
    return handed


def write(options: dict[str, str], records: list[tuple[bytes, str]]) -> tuple[Any, SinkCommitMessage]:
    """The task side of a batch write, in this process: the writer Spark would pickle, and its write()."""
    writer = KinesisBatchWriter(SCHEMA, {key.lower(): value for key, value in options.items()})
    batch = pa.RecordBatch.from_pylist([{"data": d, "partitionKey": k} for d, k in records])
    return writer, writer.write(iter([batch]))


def read_like_the_kcl(kinesis: Any, stream: str) -> list[bytes]:
    """Every shard read with aws-kinesis-agg's deaggregator, dropping sub-records outside the shard's hash range."""
    found: list[bytes] = []
    for shard in list_shards(kinesis, stream):
        for record in iterate_shard(kinesis, stream, shard.shard_id):
            lambda_record = {
                "kinesis": {
                    "kinesisSchemaVersion": "1.0",
                    "sequenceNumber": record["SequenceNumber"],
                    "approximateArrivalTimestamp": 0,
                    "partitionKey": record["PartitionKey"],
                    "data": base64.b64encode(record["Data"]),
                }
            }
            for user in deaggregate_records([lambda_record]):
                fields = user["kinesis"]
                if shard.holds_hash_key(hash_key_of(fields["partitionKey"], fields.get("explicitHashKey"))):
                    found.append(base64.b64decode(fields["data"]))
    return found


@pytest.mark.slow
def test_a_split_between_listing_and_writing_loses_no_user_record(
    spark, kinesis_mock: LocalServer, mock_stream, monkeypatch, caplog, tmp_path
) -> None:
    stream = mock_stream(shards=1)
    kinesis = kinesis_mock.client("kinesis")
    records = rows(60)
    options = source_options(kinesis_mock, stream, tmp_path / "metadata")  # the sink ignores the reading ones
    handed = split_after_listing(monkeypatch, kinesis, stream)
    with caplog.at_level(logging.INFO, logger="pyspark_aws_kinesis.sink"):
        writer, message = write(options, records)
        writer.commit([message])

    assert any(
        is_aggregated(r["Data"])
        for s in list_shards(kinesis, stream)
        for r in iterate_shard(kinesis, stream, s.shard_id)
    )
    assert Counter(read_like_the_kcl(kinesis, stream)) == Counter(data for data, _ in records)
    ours = spark.read.format("aws-kinesis").options(**options).load().select("data").collect()
    assert Counter(bytes(row.data) for row in ours) == Counter(data for data, _ in records)

    # The one aggregate (planned for the parent) landed on the child holding its first key; the records of the
    # other child went again. The count comes from the keys' MD5, not from the sink.
    first_low = hash_key_of(records[0][1]) < MIDDLE
    other_child = [data for data, key in records if (hash_key_of(key) < MIDDLE) != first_low]
    assert 0 < len(other_child) < len(records)
    assert len(handed) == 2  # listed once, then again after the answer named an unknown shard
    assert message.resent_records == len(other_child)
    assert f"re-sending the {len(other_child)} user records" in caplog.text
    assert f"{len(other_child)} records re-sent after their aggregates landed" in caplog.text


@pytest.mark.slow
def test_a_stream_that_keeps_resharding_fails_the_task_naming_the_stream(
    kinesis_mock: LocalServer, mock_stream, monkeypatch, tmp_path
) -> None:
    stream = mock_stream(shards=1)
    kinesis = kinesis_mock.client("kinesis")
    handed = split_after_listing(monkeypatch, kinesis, stream, stale_forever=True)
    with pytest.raises(task.ReshardResendError, match=f"Kinesis stream '{stream}' kept resharding") as failure:
        write(source_options(kinesis_mock, stream, tmp_path), rows(30))
    assert f"after {task.MAX_RESEND_ROUNDS} re-sends" in str(failure.value)
    assert len(handed) == task.MAX_RESEND_ROUNDS + 2  # the first listing, then one per round
