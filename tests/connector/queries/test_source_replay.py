"""Exact replay, driven like Spark drives the reader (no Spark here, so it is fast): every batch that runs again
returns the same records, positions carry over between batches, and both pyspark calling conventions work."""

from __future__ import annotations

import threading
import time

import pytest

from localaws import LocalServer
from pyspark_aws_kinesis.fetch.range import ReplayError
from pyspark_aws_kinesis.fetch.reads import ShardRead
from pyspark_aws_kinesis.metadata import open_store
from pyspark_aws_kinesis.metadata.store import MetadataConflictError
from pyspark_aws_kinesis.positions import AFTER_SEQUENCE_NUMBER, AT_TIMESTAMP
from pyspark_aws_kinesis.source.offsets import parse_offset
from tests.connector.support.efo_util import sockets_to
from tests.connector.support.source_util import (
    drain,
    next_batch,
    payloads,
    put_numbered,
    read_all,
    reader,
    roundtrip,
    source_options,
)


def test_batches_carry_positions_and_read_every_record_once(kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    stream = lite_stream(shards=2)
    produced = put_numbered(kinesalite, stream, "a", 30)
    source = reader(source_options(kinesalite, stream, tmp_path, **{"kinesis.maxFetchRecordsPerShard": "4"}))
    start = roundtrip(source.initialOffset())
    start, batches = drain(source, start, expect=len(produced))
    produced += put_numbered(kinesalite, stream, "b", 10)
    start, more = drain(source, start, expect=10)
    for rows in batches + more:
        assert all(len([r for r in rows if r["shardId"] == shard]) <= 4 for shard in {r["shardId"] for r in rows})
    assert sorted(payloads([row for rows in batches + more for row in rows])) == sorted(produced)
    assert len(batches) >= 4  # 30 records in 2 shards, at most 4 per shard per batch
    # Everything is read: the next trigger plans no batch (the start offset comes back unchanged).
    assert roundtrip(source.latestOffset(start, None)) == start


def test_a_batch_that_runs_again_returns_the_same_records(kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    stream = lite_stream(shards=2)
    put_numbered(kinesalite, stream, "a", 20)
    options = source_options(kinesalite, stream, tmp_path, **{"kinesis.maxFetchRecordsPerShard": "6"})
    source = reader(options)
    start = roundtrip(source.initialOffset())
    end = roundtrip(source.latestOffset(start, None))
    first = read_all(source, list(source.partitions(start, end)))
    put_numbered(kinesalite, stream, "late", 20)  # new records must not leak into the replay
    # A task retry: the same partitions read again on the same driver.
    assert read_all(source, list(source.partitions(start, end))) == first
    # A restart before commit with tighter limits: a new reader, same offsets, same records.
    tighter = reader({**options, "kinesis.maxFetchRecordsPerShard": "1", "kinesis.maxFetchTimePerShardSec": "1"})
    assert read_all(tighter, list(tighter.partitions(start, end))) == first
    assert len(first) == 12


def test_pyspark_40_calling_convention_and_restart(kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    """4.0.2: latestOffset() has no start; after a restart the reader knows nothing until partitions/commit."""
    stream = lite_stream(shards=1)
    produced = put_numbered(kinesalite, stream, "a", 9)
    options = source_options(kinesalite, stream, tmp_path, **{"kinesis.maxFetchRecordsPerShard": "4"})
    source = reader(options)
    pending = roundtrip(source.latestOffset())  # called before initialOffset on 4.0.2
    initial = roundtrip(source.initialOffset())
    rows = read_all(source, list(source.partitions(initial, pending)))
    source.commit(pending)
    end = roundtrip(source.latestOffset())
    rows += read_all(source, list(source.partitions(pending, end)))
    source.commit(end)
    assert payloads(rows) == produced[:8]
    # The driver dies after committing `end`; a new reader is asked latestOffset() first, then commit(end).
    restarted = reader(options)
    after_restart = roundtrip(restarted.latestOffset())
    restarted.commit(end)
    partitions = list(restarted.partitions(end, after_restart))
    last = read_all(restarted, partitions)
    assert payloads(last) == produced[8:]
    # That batch runs again in yet another process: the pending offset resolves the same way.
    again = reader(options)
    assert read_all(again, list(again.partitions(end, after_restart))) == last


def test_pending_documents_stay_bounded_over_many_restarts(kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    """4.0.2: every driver start writes one pending-offset resolution; they leave with their batches, so after
    N restarts the store holds at most kinesis.minBatchesToRetain of them (before: N)."""
    stream = lite_stream(shards=1)
    options = source_options(kinesalite, stream, tmp_path, **{"kinesis.minBatchesToRetain": "2"})
    source = reader(options)
    pending = roundtrip(source.latestOffset())
    end = pending
    rows: list[dict] = read_all(source, list(source.partitions(roundtrip(source.initialOffset()), pending)))
    source.commit(pending)
    produced: list[bytes] = []
    for restart in range(8):
        produced += put_numbered(kinesalite, stream, f"r{restart}", 2)
        restarted = reader(options)  # the driver died after committing `end`
        after_restart = roundtrip(restarted.latestOffset())
        restarted.commit(end)
        rows += read_all(restarted, list(restarted.partitions(end, after_restart)))
        restarted.commit(after_restart)
        end = after_restart
    assert payloads(rows) == produced
    documents = [path for path in (tmp_path / "pending").glob("*.json") if not path.name.startswith("source-")]
    assert 1 <= len(documents) <= 2, sorted(path.name for path in documents)


def test_latest_starts_at_query_start_and_survives_idle_batches(
    kinesis_mock: LocalServer, mock_stream, tmp_path
) -> None:
    # kinesis-mock: kinesalite 3.3.3 never answers an AT_TIMESTAMP GetShardIterator with no record after the time.
    stream = mock_stream(shards=1)
    put_numbered(kinesis_mock, stream, "old", 3)
    source = reader(source_options(kinesis_mock, stream, tmp_path, **{"kinesis.startingPosition": "LATEST"}))
    start = roundtrip(source.initialOffset())
    assert {p.kind for p in parse_offset(start).shards.values()} == {AT_TIMESTAMP}
    time.sleep(0.3)  # longer than the probe interval: the trigger below really asks Kinesis
    assert roundtrip(source.latestOffset(start, None)) == start  # idle: no batch, the position stays put
    new = put_numbered(kinesis_mock, stream, "new", 3)
    start, rows = next_batch(source, start)
    assert payloads(rows) == new
    assert {p.kind for p in parse_offset(start).shards.values()} == {AT_TIMESTAMP}  # start of the batch read
    newer = put_numbered(kinesis_mock, stream, "newer", 2)
    start, rows = next_batch(source, start)
    assert payloads(rows) == newer
    assert {p.kind for p in parse_offset(start).shards.values()} == {AFTER_SEQUENCE_NUMBER}


def test_replay_fails_clearly_when_recorded_records_are_gone(kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    stream = lite_stream(shards=1)
    put_numbered(kinesalite, stream, "a", 3)
    source = reader(source_options(kinesalite, stream, tmp_path))
    start = roundtrip(source.initialOffset())
    end = roundtrip(source.latestOffset(start, None))
    (partition,) = source.partitions(start, end)
    offset = parse_offset(end)
    store = open_store(str(tmp_path))
    task = partition.tasks[0]
    # Pretend a first run stopped at a record this shard does not have.
    store.put_shard_read(
        offset.source_id, offset.batch_id, ShardRead(task.stream, task.shard_id, task.start, 99, "9" * 56, 0)
    )
    with pytest.raises(ReplayError, match=r"without meeting record 9+/0 where the first run stopped after 99"):
        read_all(source, [partition])


def test_a_concurrent_attempt_with_another_end_fails(kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    stream = lite_stream(shards=1)
    source = reader(source_options(kinesalite, stream, tmp_path))
    offset = parse_offset(roundtrip(source.latestOffset(roundtrip(source.initialOffset()), None)))
    store = open_store(str(tmp_path))
    position = next(iter(offset.shards.values()))
    mine = ShardRead(stream, "shardId-000000000000", position, 0)
    store.record_shard_read(offset.source_id, 0, mine)
    store.record_shard_read(offset.source_id, 0, mine)  # the same end again is fine
    with pytest.raises(MetadataConflictError, match="already recorded by another attempt"):
        store.record_shard_read(offset.source_id, 0, ShardRead(stream, mine.shard_id, position, 1, "12", 0))


def test_commit_purges_beyond_min_batches_to_retain(kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    stream = lite_stream(shards=1)
    source = reader(source_options(kinesalite, stream, tmp_path, **{"kinesis.minBatchesToRetain": "2"}))
    start = roundtrip(source.initialOffset())
    for index in range(5):
        put_numbered(kinesalite, stream, f"b{index}", 1)
        start, _rows = next_batch(source, start)
    source_id = parse_offset(start).source_id
    assert sorted(int(p.name) for p in (tmp_path / source_id).iterdir()) == [3, 4]


def test_threads_and_sockets_stay_flat_over_many_batches(kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    """Driver and executor halves in this process, 30 batches over 2 shards: after the first 10 (pools filled),
    no thread and no connection to the server is added per batch."""
    stream = lite_stream(shards=2)
    options = source_options(kinesalite, stream, tmp_path, **{"kinesis.maxFetchRecordsPerShard": "3"})
    source = reader(options)
    start = roundtrip(source.initialOffset())
    counts = []
    for batch in range(30):
        put_numbered(kinesalite, stream, f"b{batch}", 6, keys=6)
        start, rows = next_batch(source, start)
        assert rows
        if batch in (9, 29):
            counts.append((threading.active_count(), sockets_to(kinesalite.port)))
    (threads_then, sockets_then), (threads_now, sockets_now) = counts
    assert threads_now <= threads_then, counts
    assert sockets_now <= sockets_then + 2, counts  # a connection the server closed may be open again
