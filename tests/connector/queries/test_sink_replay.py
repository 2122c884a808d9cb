"""A micro-batch that Spark runs again after a driver restart, written by the aws-kinesis sink into kinesalite: with
``kinesis.sink.skipReplayedPartitions`` its partitions written whole are not written twice.

The replay is the one a driver killed between the sink's commit and Spark's commit log causes: the last batch's
entry of the checkpoint's commit log is removed, so the restarted query runs that batch again with the same offsets
(a file source: the same rows); the restart's progress shows the batch ran. Without the option the same task writes
its rows again: ``tests/connector/sink/test_replay.py``."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from localaws import LocalServer
from tests.connector.queries.test_sink import FORMAT, user_records
from tests.connector.support.sink_util import sink_options

ROWS_PER_FILE = 200


def _run(spark, source: Path, options: dict[str, str], checkpoint: Path) -> list[int]:
    """Run the query to the end of its input; the rows of each batch it ran."""
    query = (
        spark.readStream.schema("data string, partitionKey string")
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .writeStream.format(FORMAT)
        .options(**options)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    return [progress["numInputRows"] for progress in query.recentProgress if progress["numInputRows"]]


def test_a_batch_run_again_after_a_restart_is_not_written_twice(
    spark, kinesalite: LocalServer, lite_stream, tmp_path: Path
) -> None:
    stream, source, checkpoint, notes = lite_stream(shards=2), tmp_path / "in", tmp_path / "ck", tmp_path / "notes"
    source.mkdir()
    for part in range(2):
        lines = [json.dumps({"data": f"e-{part}-{i}", "partitionKey": f"k-{i % 9}"}) for i in range(ROWS_PER_FILE)]
        (source / f"part-{part}.json").write_text("\n".join(lines))
    extra = {"kinesis.sink.skipReplayedPartitions": "true", "kinesis.metadataPath": str(notes)}
    options = sink_options(kinesalite.endpoint_url, stream, **extra)
    assert _run(spark, source, options, checkpoint) == [ROWS_PER_FILE, ROWS_PER_FILE]
    for name in ("1", ".1.crc"):  # as if the driver died before logging batch 1 as committed
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    assert _run(spark, source, options, checkpoint) == [ROWS_PER_FILE]  # batch 1 again

    stored = Counter((data.decode(), key) for _, data, key in user_records(kinesalite.client("kinesis"), stream))
    assert stored == Counter((f"e-{p}-{i}", f"k-{i % 9}") for p in range(2) for i in range(ROWS_PER_FILE))
    # batch 0's notes left when batch 1 committed; batch 1's stay until batch 2 commits
    (query_notes,) = notes.glob("sink-*")
    assert sorted(path.name for path in query_notes.iterdir()) == [f"{1:020d}"]
