"""A checkpoint and metadata store written by an earlier version of the connector resume exactly on today's code.

The fixture (``support/stored_checkpoint.py`` says how it was made) was written by the connector at commit 7965991 on
pyspark 4.0.2: a pending offset and its resolution, a format-2 offset, the source document, two batches' shard
reads in the path store, and batch 1 planned and read but not committed. A fresh kinesalite with its clock fixed
holds the same stream again (same shard ids and sequence numbers, checked first). Restarted from the copy, the
query must replay batch 1 with exactly the rows it gave the first time, then read on from where batch 1 stopped:
every record of the stream exactly once, counting the batch the first run committed.
"""

from __future__ import annotations

from pathlib import Path

from localaws.streams import put_records
from tests.connector.support.source_util import FORMAT, wait_for
from tests.connector.support.stored_checkpoint import (
    committed_batches,
    copy_fixture,
    fixed_clock_stream,
    fixture,
    query_options,
)


def test_a_checkpoint_of_an_earlier_version_replays_its_last_batch_and_reads_every_record_once(
    spark, tmp_path: Path
) -> None:
    stored = fixture()
    first_run = {int(batch): rows for batch, rows in stored["batches"].items()}
    with fixed_clock_stream(tmp_path) as (server, sequence_numbers):
        assert sequence_numbers == stored["sequenceNumbers"], "the stream made again is not the stored one"
        later = [(f"later-{i:04d}".encode(), f"key-{i % 13}") for i in range(20)]
        put_records(server.client("kinesis"), stored["stream"], later)
        checkpoint, metadata = copy_fixture(tmp_path)
        committed = committed_batches(checkpoint)
        expected = sorted([f"stored-{i:04d}" for i in range(len(sequence_numbers))] + [d.decode() for d, _ in later])
        restarted: dict[int, list[str]] = {}

        def keep(frame, batch_id: int) -> None:
            restarted[batch_id] = sorted(bytes(row.data).decode() for row in frame.select("data").collect())

        def rows() -> list[str]:
            kept = [first_run[batch] for batch in committed] + list(restarted.values())
            return sorted(row for batch in kept for row in batch)

        query = (
            spark.readStream.format(FORMAT)
            .options(**query_options(server, metadata))
            .load()
            .writeStream.foreachBatch(keep)
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="100 milliseconds")
            .start()
        )
        try:
            wait_for(lambda: len(rows()) >= len(expected) or not query.isActive, what="every record")
        finally:
            query.stop()
    assert query.exception() is None
    assert min(restarted) == max(committed) + 1  # the restart began with the batch the first run left uncommitted
    replayed = sorted(set(first_run) & set(restarted))
    assert replayed, "the stored checkpoint leaves a batch to replay"
    assert {batch: restarted[batch] for batch in replayed} == {batch: first_run[batch] for batch in replayed}
    assert rows() == expected
