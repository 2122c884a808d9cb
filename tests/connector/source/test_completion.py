"""``source.completion.complete_reads``: the driver finishes the reads a batch left unfinished.

The rules under test (the module's docstrings, docs/source.md "A batch that was not read to its end"): the driver
completes each unfinished shard's read itself, in parallel, under the executors' rules (the batch's start and arrival
bound, ``kinesis.maxFetchRecordsPerShard``) but without ``maxFetchTimePerShardSec``; records it first-write-wins (an
executor's record that appears meanwhile wins); logs a WARNING with how many records the job did not see and where
the next batch starts; and fails, naming the store, only when the store lost the source document too.

The shard ranges are stand-ins (what ``settings.shard_reader`` returns); the metadata store is a real local one.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

import pytest

from pyspark_aws_kinesis.fetch.range import FetchLimits, ShardTask
from pyspark_aws_kinesis.fetch.reads import ShardRead
from pyspark_aws_kinesis.metadata import open_store
from pyspark_aws_kinesis.positions import AFTER_SEQUENCE_NUMBER, TRIM_HORIZON, Position
from pyspark_aws_kinesis.source.completion import complete_reads
from pyspark_aws_kinesis.source.guards import MissingMetadataError, source_document_name
from pyspark_aws_kinesis.source.offsets import KinesisOffset

SOURCE_ID = "0123456789abcdef0123456789abcdef"
SHARD0, SHARD1 = "shardId-000000000000", "shardId-000000000001"
ARN = "arn:aws:kinesis:us-east-1:123456789012:stream/orders/consumer/q:1"


def task(stream: str, shard_id: str) -> ShardTask:
    return ShardTask(stream, shard_id, 0, 2**128 - 1, Position(TRIM_HORIZON))


def read_of(task: ShardTask, records: int, last: str) -> ShardRead:
    return ShardRead(task.stream, task.shard_id, task.start, records, last_sequence_number=last)


class FakeRange:
    """A shard's range: ``slices`` yields (page, start, stop) of the records it returns; then ``result``."""

    def __init__(self, slices: list[tuple[int, int]], result: ShardRead, before: Any = None):
        self._slices, self._result, self._before = slices, result, before
        self.result: ShardRead | None = None

    def slices(self, transport: Any):
        if self._before is not None:
            self._before()
        for start, stop in self._slices:
            yield object(), start, stop
        self.result = self._result


@dataclass
class FakeSettings:
    max_fetch_records: int = 100_000
    max_fetch_time_s: float | None = 30.0  # set, and not for the completion
    ranges: dict[str, FakeRange] = field(default_factory=dict)
    calls: list[tuple[ShardTask, FetchLimits, str | None]] = field(default_factory=list)

    def shard_reader(self, task: ShardTask, limits: FetchLimits, consumer_arn: str | None = None):
        self.calls.append((task, limits, consumer_arn))
        return self.ranges[task.shard_id], "transport"


def batch(tmp_path: Any, batch_id: int = 2, until_ms: int | None = 1_700_000_000_000, document: bool = True):
    return KinesisOffset(
        SOURCE_ID,
        str(tmp_path),
        batch_id,
        {f"orders/{SHARD0}": Position(TRIM_HORIZON), f"orders/{SHARD1}": Position(TRIM_HORIZON)},
        until_ms=until_ms,
        source_document=document,
    )


@pytest.fixture
def store(tmp_path: Any) -> Any:
    store = open_store(str(tmp_path))
    store.put_document(source_document_name(SOURCE_ID), {"sourceId": SOURCE_ID})
    return store


def test_an_unfinished_read_is_completed_recorded_and_returned_by_shard_key(tmp_path, store) -> None:
    tasks = [task("orders", SHARD0), task("orders", SHARD1)]
    settings = FakeSettings(
        ranges={
            SHARD0: FakeRange([(0, 10), (0, 5)], read_of(tasks[0], 15, "100")),
            SHARD1: FakeRange([], read_of(tasks[1], 0, None)),  # nothing there
        }
    )
    reads = complete_reads(settings, batch(tmp_path), store, tasks, {})  # type: ignore[arg-type]
    assert set(reads) == {f"orders/{SHARD0}", f"orders/{SHARD1}"}
    assert reads[f"orders/{SHARD0}"].next_start() == Position(AFTER_SEQUENCE_NUMBER, "100")
    assert store.get_shard_read(SOURCE_ID, 2, "orders", SHARD0) == reads[f"orders/{SHARD0}"]
    assert store.get_shard_read(SOURCE_ID, 2, "orders", SHARD1) == reads[f"orders/{SHARD1}"]


def test_the_completion_reads_under_the_batchs_rules_without_the_time_limit(tmp_path, store) -> None:
    tasks = [task("orders", SHARD0), task("returns", SHARD1)]
    settings = FakeSettings(
        max_fetch_records=777,
        ranges={SHARD0: FakeRange([], read_of(tasks[0], 0, None)), SHARD1: FakeRange([], read_of(tasks[1], 0, None))},
    )
    complete_reads(settings, batch(tmp_path, until_ms=1234), store, tasks, {"orders": ARN})  # type: ignore[arg-type]
    by_shard = {called.shard_id: (called, limits, arn) for called, limits, arn in settings.calls}
    for shard_id, expected_arn in ((SHARD0, ARN), (SHARD1, None)):  # each stream's enhanced fan-out consumer, if any
        called, limits, arn = by_shard[shard_id]
        assert called in tasks
        assert arn == expected_arn
        assert limits.max_records == 777  # kinesis.maxFetchRecordsPerShard
        assert limits.stop_after_ms == 1234  # the batch's arrival bound
        assert not limits.whole_answer_at_bound  # records that arrived since start the next batch
        assert limits.max_time_s is None  # no maxFetchTimePerShardSec: a replay must stop at the same place


def test_a_record_written_meanwhile_by_an_executor_wins(tmp_path, store) -> None:
    shard = task("orders", SHARD0)
    executors = store.put_shard_read(SOURCE_ID, 2, read_of(shard, 8, "80"))
    settings = FakeSettings(ranges={SHARD0: FakeRange([(0, 12)], read_of(shard, 12, "120"))})
    reads = complete_reads(settings, batch(tmp_path), store, [shard], {})  # type: ignore[arg-type]
    assert reads[f"orders/{SHARD0}"] == executors
    assert store.get_shard_read(SOURCE_ID, 2, "orders", SHARD0) == executors


def test_a_warning_says_how_many_records_the_job_did_not_see_and_where_the_next_batch_starts(
    tmp_path, store, caplog: pytest.LogCaptureFixture
) -> None:
    shard = task("orders", SHARD0)
    settings = FakeSettings(ranges={SHARD0: FakeRange([(0, 10), (3, 8)], read_of(shard, 15, "150"))})
    with caplog.at_level(logging.WARNING, logger="pyspark_aws_kinesis.source"):
        complete_reads(settings, batch(tmp_path, batch_id=2), store, [shard], {})  # type: ignore[arg-type]
    (record,) = [r for r in caplog.records if r.name == "pyspark_aws_kinesis.source.completion"]
    assert record.levelno == logging.WARNING
    message = record.getMessage()
    assert message.startswith(f"aws-kinesis batch 2 did not read stream 'orders' shard {SHARD0} to its end")
    assert "the driver completed the read; the batch's 15 records there were not seen by the job" in message
    where = message.split("and the next batch starts after them at ", 1)[1]
    assert AFTER_SEQUENCE_NUMBER in where and "150" in where


def test_shards_are_completed_in_parallel(tmp_path, store) -> None:
    """Each range waits for the other to start: done one after the other, the barrier breaks."""
    both_started = threading.Barrier(2, timeout=2)
    tasks = [task("orders", SHARD0), task("orders", SHARD1)]
    settings = FakeSettings(
        ranges={
            shard.shard_id: FakeRange([(0, 1)], read_of(shard, 1, "1"), before=both_started.wait) for shard in tasks
        }
    )
    reads = complete_reads(settings, batch(tmp_path), store, tasks, {})  # type: ignore[arg-type]
    assert len(reads) == 2


def test_a_store_that_lost_the_source_document_fails_naming_it(tmp_path) -> None:
    emptied = open_store(str(tmp_path))  # the query wrote its source document there; it is gone
    shard = task("orders", SHARD0)
    settings = FakeSettings(ranges={SHARD0: FakeRange([(0, 1)], read_of(shard, 1, "1"))})
    with pytest.raises(MissingMetadataError) as info:
        complete_reads(settings, batch(tmp_path), emptied, [shard], {})  # type: ignore[arg-type]
    assert str(tmp_path) in str(info.value) and SOURCE_ID in str(info.value)
    assert "source document" in str(info.value)
    assert settings.calls == []  # nothing read, nothing recorded
    assert emptied.get_shard_read(SOURCE_ID, 2, "orders", SHARD0) is None


def test_a_query_started_before_source_documents_existed_is_completed_without_one(tmp_path) -> None:
    store = open_store(str(tmp_path))
    shard = task("orders", SHARD0)
    settings = FakeSettings(ranges={SHARD0: FakeRange([(0, 1)], read_of(shard, 1, "1"))})
    reads = complete_reads(settings, batch(tmp_path, document=False), store, [shard], {})  # type: ignore[arg-type]
    assert reads[f"orders/{SHARD0}"].records == 1


def test_nothing_to_complete(tmp_path, store) -> None:
    assert complete_reads(FakeSettings(), batch(tmp_path), store, [], {}) == {}  # type: ignore[arg-type]
