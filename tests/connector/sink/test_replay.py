"""``sink.replay``: with ``kinesis.sink.skipReplayedPartitions``, a partition that an earlier attempt of its
micro-batch wrote whole, with the same rows, is not sent again; one with other rows is; notes of batches Spark has
committed are purged; an executor that does not see the driver's store fails before sending.

The writers run as Spark runs them but without Spark: the task's place in its query (Spark's local properties) is
given by replacing ``partition_of_batch``; Kinesis is moto's (``conftest``). The query-level replay after a driver
restart is in ``tests/connector/queries/test_sink_replay.py``.
"""

from __future__ import annotations

import logging
import pickle
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

import pyspark_aws_kinesis.sink.replay as replay
from pyspark_aws_kinesis.metadata.filesystem import LocalStore
from pyspark_aws_kinesis.options import OptionError
from pyspark_aws_kinesis.sink.columns import SinkColumns
from pyspark_aws_kinesis.sink.commit import SinkCommitMessage
from pyspark_aws_kinesis.sink.replay import PartitionOfBatch, ReplayNotesNotSharedError, rows_digest
from pyspark_aws_kinesis.sink.writer import KinesisBatchWriter, KinesisStreamWriter
from tests.connector.support.moto_sink_util import SCHEMA, Streams, expected, options, rows, stored

COLUMNS = SinkColumns("data", "partitionKey", "explicitHashKey")


def _table(data: list[bytes], keys: list[str], hash_keys: list[str | None]) -> pa.Table:
    return pa.table({"data": data, "partitionKey": keys, "explicitHashKey": pa.array(hash_keys, pa.string())})


# --- the digest ---------------------------------------------------------------------------------------------------


def test_the_digest_is_the_same_for_the_same_rows_however_chunked_or_ordered() -> None:
    whole = _table([b"a", b"bc", b""], ["k1", "k2", "k3"], [None, "5", ""])
    chunked = pa.concat_tables([whole.slice(0, 1), whole.slice(1, 1), whole.slice(2)])
    assert chunked["data"].num_chunks == 3
    padded = _table([b"zz", b"a", b"bc", b""], ["k0", "k1", "k2", "k3"], ["1", None, "5", ""]).slice(1)
    # A task reads its shards side by side: the same rows come in another interleaving in each attempt.
    shuffled = _table([b"", b"a", b"bc"], ["k3", "k1", "k2"], ["", None, "5"])
    digests = {rows_digest([("s", table)], COLUMNS) for table in (whole, chunked, padded, shuffled)}
    assert len(digests) == 1


@pytest.mark.parametrize(
    ("stream", "data", "keys", "hash_keys"),
    [
        ("other", [b"a", b"bc"], ["k1", "k2"], [None, "5"]),  # another stream
        ("s", [b"a", b"bc", b"a"], ["k1", "k2", "k1"], [None, "5", None]),  # a row once more
        ("s", [b"a", b"bc"], ["k2", "k1"], [None, "5"]),  # the same keys on other rows
        ("s", [b"a", b"bd"], ["k1", "k2"], [None, "5"]),  # one byte of data
        ("s", [b"ab", b"c"], ["k1", "k2"], [None, "5"]),  # the same bytes cut elsewhere
        ("s", [b"a", b"bc"], ["k1", "k3"], [None, "5"]),  # a partition key
        ("s", [b"a", b"bc"], ["k1", "k2"], ["", "5"]),  # an empty hash key instead of none
    ],
)
def test_the_digest_changes_with_any_row_its_count_or_the_target_stream(
    stream: str, data: list[bytes], keys: list[str], hash_keys: list[str | None]
) -> None:
    first = rows_digest([("s", _table([b"a", b"bc"], ["k1", "k2"], [None, "5"]))], COLUMNS)
    assert rows_digest([(stream, _table(data, keys, hash_keys))], COLUMNS) != first


# --- a task's write -----------------------------------------------------------------------------------------------


@pytest.fixture
def in_batch(monkeypatch: pytest.MonkeyPatch):
    """Make the writers' tasks run as partition ``partition`` of batch ``batch`` of query ``q-1``."""

    def place(batch: int, partition: int = 0) -> None:
        monkeypatch.setattr(replay, "partition_of_batch", lambda: PartitionOfBatch("q-1", batch, partition))

    return place


def skipping(stream: str, notes: Path, **extra: str) -> dict[str, str]:
    return options(
        stream, **{"kinesis.sink.skipReplayedPartitions": "true", "kinesis.metadataPath": str(notes)}, **extra
    )


def test_a_partition_written_whole_is_not_sent_again_when_its_batch_runs_again(
    kinesis: Streams, in_batch, tmp_path: Path
) -> None:
    in_batch(3)
    writer = KinesisStreamWriter(SCHEMA, skipping(kinesis.orders, tmp_path))
    first = writer.write(iter([rows(40)]))
    assert (first.user_records, first.skipped_partitions, first.query_id) == (40, 0, "q-1")
    same = writer.write(iter([rows(40).slice(0, 10), rows(40).slice(10)]))  # the batch again, chunked otherwise
    assert (same.skipped_partitions, same.skipped_records, same.user_records, same.put.calls) == (1, 40, 0, 0)
    assert "40 records in 1 partitions not sent again" in same.describe()
    other = writer.write(iter([rows(40, "other")]))  # the batch again, but its plan put other rows here
    assert (other.skipped_partitions, other.rewritten_partitions, other.user_records) == (0, 1, 40)
    assert stored(kinesis.client, kinesis.orders)[0] == expected(40) + expected(40, "other")


def test_without_the_option_a_batch_that_runs_again_writes_again(kinesis: Streams, in_batch) -> None:
    in_batch(3)
    writer = KinesisStreamWriter(SCHEMA, options(kinesis.orders))
    writer.write(iter([rows(40)]))
    assert writer.write(iter([rows(40)])).skipped_partitions == 0
    assert stored(kinesis.client, kinesis.orders)[0] == expected(40) + expected(40)


def test_notes_are_per_batch_and_partition(kinesis: Streams, in_batch, tmp_path: Path) -> None:
    writer = KinesisStreamWriter(SCHEMA, skipping(kinesis.orders, tmp_path))
    for batch, partition in [(3, 0), (3, 1), (4, 0)]:
        in_batch(batch, partition)
        assert writer.write(iter([rows(10)])).skipped_partitions == 0
    in_batch(3, 1)
    assert writer.write(iter([rows(10)])).skipped_partitions == 1
    assert stored(kinesis.client, kinesis.orders)[0] == Counter({row: 3 for row in expected(10)})


def test_a_task_that_fails_before_its_rows_are_stored_leaves_no_note(kinesis: Streams, in_batch, tmp_path) -> None:
    in_batch(5)
    writer = KinesisStreamWriter(SCHEMA, skipping("no-such-stream", tmp_path))
    with pytest.raises(Exception, match="no-such-stream"):
        writer.write(iter([rows(10)]))
    assert LocalStore(str(tmp_path)).get_batch_note("sink-q-1", 5, "partition-0") is None


def test_outside_a_micro_batch_nothing_is_skipped_nor_noted(kinesis: Streams, tmp_path: Path) -> None:
    writer = KinesisStreamWriter(SCHEMA, skipping(kinesis.orders, tmp_path))  # no Spark task: no batch id
    for _ in range(2):
        message = writer.write(iter([rows(5)]))
        assert (message.skipped_partitions, message.query_id) == (0, None)
    assert stored(kinesis.client, kinesis.orders)[0] == expected(5) + expected(5)


def test_an_executor_that_does_not_see_the_drivers_store_fails_before_sending(
    kinesis: Streams, in_batch, tmp_path: Path
) -> None:
    in_batch(1)
    driver = KinesisStreamWriter(SCHEMA, skipping(kinesis.orders, tmp_path / "driver"))
    executor = pickle.loads(pickle.dumps(driver))  # as Spark ships it, to a machine without the driver's disk
    location = replace(driver.settings.replay.location, path=str(tmp_path / "executor"))
    executor.settings = replace(driver.settings, replay=replay.ReplayNotes(location))
    with pytest.raises(ReplayNotesNotSharedError, match=r"kinesis\.metadataPath"):
        executor.write(iter([rows(5)]))
    assert stored(kinesis.client, kinesis.orders) == (Counter(), 0)
    assert driver.write(iter([rows(5)])).user_records == 5  # the driver's own disk has the document


# --- the driver ---------------------------------------------------------------------------------------------------


def test_a_commit_purges_the_notes_of_the_batches_before_it(kinesis: Streams, in_batch, tmp_path: Path) -> None:
    writer = KinesisStreamWriter(SCHEMA, skipping(kinesis.orders, tmp_path))
    messages = []
    for batch in range(4):
        in_batch(batch)
        messages.append(writer.write(iter([rows(3)])))
    writer.commit([messages[3], None], 3)
    store = LocalStore(str(tmp_path))
    assert [store.get_batch_note("sink-q-1", b, "partition-0") is not None for b in range(4)] == [False] * 3 + [True]


def test_a_failed_purge_warns_and_the_commit_goes_on(
    kinesis: Streams, in_batch, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    in_batch(2)
    writer = KinesisStreamWriter(SCHEMA, skipping(kinesis.orders, tmp_path))
    message = writer.write(iter([rows(3)]))

    def fail(*_args) -> int:
        raise OSError("store unreachable")

    monkeypatch.setattr(replay.ReplayNotes, "purge", fail)
    with caplog.at_level(logging.INFO, logger="pyspark_aws_kinesis.sink"):
        writer.commit([message], 2)
    assert any(
        "could not delete the notes of batches before 2: store unreachable" in r.getMessage() for r in caplog.records
    )


def test_the_option_needs_a_shared_store_and_a_stream_write(tmp_path: Path) -> None:
    with pytest.raises(OptionError, match=r"skipReplayedPartitions=true needs a store shared by driver and executors"):
        KinesisStreamWriter(SCHEMA, options("orders", **{"kinesis.sink.skipReplayedPartitions": "true"}))
    with pytest.raises(OptionError, match=r"applies to writeStream only"):
        KinesisBatchWriter(SCHEMA, skipping("orders", tmp_path))


def test_a_commit_message_of_a_skipped_partition_sums_with_the_others() -> None:
    from pyspark_aws_kinesis.sink.commit import summarize

    skipped = SinkCommitMessage(0, query_id="q", skipped_records=7, skipped_partitions=1)
    written = SinkCommitMessage(1, ("s",), 5, query_id="q", rewritten_partitions=1)
    total, tasks = summarize([skipped, written, None])
    assert (tasks, total.query_id, total.skipped_records, total.skipped_partitions) == (2, "q", 7, 1)
    assert total.rewritten_partitions == 1 and "1 partitions written again" in total.describe()
