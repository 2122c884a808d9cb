"""Batches that were not read to their end: the planner completes the read on the driver under the executors'
range rules, the next batch starts after the skipped records, and the query keeps running (driven like Spark
drives the reader, and inside Spark with foreachBatch and ``limit``)."""

from __future__ import annotations

import logging

import pytest

from localaws import LocalServer
from pyspark_aws_kinesis.metadata import open_store
from pyspark_aws_kinesis.metadata.store import batch_shard_key
from pyspark_aws_kinesis.source.guards import MissingMetadataError, source_document_name
from pyspark_aws_kinesis.source.offsets import parse_offset
from tests.connector.support.source_util import (
    FORMAT,
    next_batch,
    payloads,
    plan_first_batch,
    put_numbered,
    read_all,
    reader,
    roundtrip,
    source_options,
    wait_for,
)


def test_a_lost_record_is_completed_to_the_original_end(kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    """Delete one shard's record of a read batch: the planner's completion ends where the executor's read did,
    although more records arrived since (the batch's arrival bound) and the cap falls inside them."""
    stream = lite_stream(shards=2)
    put_numbered(kinesalite, stream, "a", 10)
    options = source_options(kinesalite, stream, tmp_path, **{"kinesis.maxFetchRecordsPerShard": "3"})
    source = reader(options)
    start, end = plan_first_batch(source)
    read_all(source, list(source.partitions(start, end)))
    offset = parse_offset(end)
    store = open_store(str(tmp_path))
    originals = {key: store.get_shard_read(offset.source_id, 0, stream, key.split("/")[1]) for key in offset.active()}
    assert all(read is not None and read.records > 0 for read in originals.values())
    key = sorted(originals)[0]
    (tmp_path / offset.source_id / f"{batch_shard_key(0, *key.split('/'))}.json").unlink()
    put_numbered(kinesalite, stream, "late", 10)  # after the batch was planned: not the batch's records
    planned = parse_offset(roundtrip(reader(options).latestOffset(end, None)))
    completed = store.get_shard_read(offset.source_id, 0, *key.split("/"))
    assert completed is not None and completed.same_range(originals[key])
    assert planned.shards[key] == originals[key].next_start()


def test_a_batch_nobody_read_is_skipped_and_the_next_starts_after_it(
    kinesalite: LocalServer, lite_stream, tmp_path, caplog
) -> None:
    stream = lite_stream(shards=2)
    skipped = put_numbered(kinesalite, stream, "skipped", 12)
    source = reader(source_options(kinesalite, stream, tmp_path))
    start, end = plan_first_batch(source)
    source.partitions(start, end)  # planned, never read (a foreachBatch that returned at once)
    source.commit(end)
    new = put_numbered(kinesalite, stream, "new", 5)
    with caplog.at_level(logging.WARNING, logger="pyspark_aws_kinesis"):
        _after, rows = next_batch(source, end)
    assert sorted(payloads(rows)) == sorted(new)
    assert "did not read" in caplog.text and "the driver completed the read" in caplog.text
    assert len(skipped) == 12


def test_a_read_stopped_midway_is_completed_not_resumed(kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    """A ``limit``/``show`` stops reading after the first rows: the rest of the batch's range is skipped too."""
    stream = lite_stream(shards=1)
    first = put_numbered(kinesalite, stream, "first", 20)
    options = source_options(kinesalite, stream, tmp_path, **{"kinesis.getRecords.numberOfRecordsPerFetch": "4"})
    source = reader(options)
    start, end = plan_first_batch(source)
    (partition,) = source.partitions(start, end)
    batches = source.read(partition)
    assert payloads(next(batches).to_pylist()) == first[:1]  # the probe's answer (Limit 1: record size unknown)
    batches.close()  # the task stops pulling rows
    source.commit(end)
    new = put_numbered(kinesalite, stream, "new", 3)
    _after, rows = next_batch(source, end)
    assert payloads(rows) == new


def test_a_lost_store_fails_saying_so(kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    stream = lite_stream(shards=1)
    put_numbered(kinesalite, stream, "a", 3)
    options = source_options(kinesalite, stream, tmp_path)
    source = reader(options)
    start, end = plan_first_batch(source)
    read_all(source, list(source.partitions(start, end)))
    source_id = parse_offset(end).source_id
    assert open_store(str(tmp_path)).get_document(source_document_name(source_id)) is not None
    for path in sorted(tmp_path.rglob("*"), reverse=True):  # the whole store is gone
        path.unlink() if path.is_file() else path.rmdir()
    with pytest.raises(MissingMetadataError, match=r"source document .* deleted or emptied.*kinesis.metadataPath"):
        reader(options).latestOffset(end, None)


@pytest.mark.slow
def test_spark_foreach_batch_that_skips_batches_or_limits_keeps_running(
    spark, kinesalite: LocalServer, lite_stream, tmp_path
) -> None:
    """Batch 0 is skipped without touching its DataFrame, batch 1 only looks at one row, batch 2 is read."""
    stream = lite_stream(shards=2)
    put_numbered(kinesalite, stream, "zero", 30)
    seen: dict[int, list[bytes]] = {}

    def handle(frame, batch_id: int) -> None:
        if batch_id == 0:
            return
        if batch_id == 1:
            seen[1] = [bytes(row.data) for row in frame.limit(1).collect()]
            return
        seen[batch_id] = [bytes(row.data) for row in frame.collect()]

    options = source_options(
        kinesalite, stream, tmp_path / "meta", **{"kinesis.getRecords.numberOfRecordsPerFetch": "5"}
    )
    query = (
        spark.readStream.format(FORMAT)
        .options(**options)
        .load()
        .writeStream.foreachBatch(handle)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        query.processAllAvailable()
        put_numbered(kinesalite, stream, "one", 30)
        wait_for(lambda: 1 in seen or query.exception(), what="batch 1")
        query.processAllAvailable()
        last = put_numbered(kinesalite, stream, "two", 7)
        # Not processAllAvailable alone: a trigger that reuses a probe answer from before the put ends it early.
        wait_for(lambda: set(last) <= {row for rows in seen.values() for row in rows} or query.exception(), what="two")
        query.processAllAvailable()
        assert query.exception() is None
    finally:
        query.stop()
    assert len(seen[1]) == 1
    later = [row for batch_id, rows in seen.items() if batch_id >= 2 for row in rows]
    # Every new record once; nothing of the skipped batch 0 comes back. (A shard whose probe had not yet seen
    # the "one" records when batch 1 was planned was not in batch 1: its records come in a later batch.)
    assert len(later) == len(set(later)) and set(last) <= set(later)
    assert not [row for row in later if row.startswith(b"zero-")]
