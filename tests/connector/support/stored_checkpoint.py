"""A checkpoint and metadata store written by an earlier version of the connector, and the stream it read.

``queries/test_source_stored_checkpoint.py`` resumes the query from them with today's code: offsets and metadata
written before a change must keep resuming exactly after it. This module makes the fixture and gives it back:

- ``python tests/connector/support/stored_checkpoint.py`` (run once, with ``.venv-compat``'s pyspark 4.0.2, EMR's,
  at commit 7965991, just before the connector's modules moved into packages) starts kinesalite with its clock fixed
  (``fixed_clock.js``), creates the stream ``STREAM`` and puts ``records()``, runs a streaming query (GetRecords,
  path metadata store, at most 10 records per shard per batch, a foreachBatch sink that notes each batch's rows)
  until two batches are committed, stops it, and drops the last batch's commit, as if the driver had died
  between the sink and the commit: the restart must replay that batch. It then stores the checkpoint, the
  metadata directory and ``fixture.json`` (the records' shard ids and sequence numbers, the rows each batch
  gave, the metadata path the offsets name) under ``data/checkpoint-7965991``. Do not make it again: it stands
  for what that version wrote.
- ``fixed_clock_stream()`` makes the stream again on a fresh kinesalite: with the clock fixed at ``CLOCK_MS``,
  kinesalite gives the same records the same shard ids and sequence numbers (it builds them from the creation
  and put times and a counter), so the stored positions point at the same records; the test checks they do.
- ``copy_fixture()`` copies checkpoint and metadata into a test's directory. Offsets (and pyspark 4.0.2's pending
  offsets' resolutions) carry the metadata store's absolute path: the copy points that one string at the copy
  and drops the Hadoop checksums of the files it changed. Every other byte stays as the old code wrote it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from localaws import KINESALITE, LocalServer, ServerSpec  # noqa: E402
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY, start_server  # noqa: E402
from localaws.streams import create_stream, put_records  # noqa: E402

FIXTURE = Path(__file__).with_name("data") / "checkpoint-7965991"
CLOCK_JS = Path(__file__).with_name("fixed_clock.js")
CLOCK_MS = 1_577_836_800_000  # 2020-01-01T00:00:00Z: every record "arrived" then, long before any planning time
STREAM = "stored-checkpoint"
SHARDS = 2
RECORDS = 60
PER_SHARD = "10"  # kinesis.maxFetchRecordsPerShard: the records take several batches

FIXED_CLOCK_KINESALITE = ServerSpec(
    "kinesalite-fixed-clock",
    KINESALITE.command,
    lambda port: {
        "NODE_OPTIONS": f"{os.environ.get('NODE_OPTIONS', '')} --require={CLOCK_JS}".strip(),
        "KINESALITE_CLOCK_MS": str(CLOCK_MS),
    },
)


def records() -> list[tuple[bytes, str]]:
    """The stream's records as (data, partition key), in the order they are put."""
    return [(f"stored-{i:04d}".encode(), f"key-{i % 13}") for i in range(RECORDS)]


@contextmanager
def fixed_clock_stream(log_dir: Path) -> Iterator[tuple[LocalServer, list[list[str]]]]:
    """A fresh kinesalite with its clock fixed, holding ``STREAM`` with ``records()``; yields the server and each
    record's [shard id, sequence number]."""
    server = start_server(FIXED_CLOCK_KINESALITE, log_dir)
    try:
        server.wait_until_ready()
        kinesis = server.client("kinesis")
        create_stream(kinesis, STREAM, SHARDS)
        put = put_records(kinesis, STREAM, records())
        yield server, [[item["ShardId"], item["SequenceNumber"]] for item in put]
    finally:
        server.stop()


def query_options(server: LocalServer, metadata_path: Path) -> dict[str, str]:
    return {
        "kinesis.streamName": STREAM,
        "kinesis.endpointUrl": server.endpoint_url,
        "kinesis.awsAccessKeyId": DUMMY_ACCESS_KEY,
        "kinesis.awsSecretKey": DUMMY_SECRET_KEY,
        "kinesis.metadataPath": str(metadata_path),
        "kinesis.startingPosition": "TRIM_HORIZON",
        "kinesis.maxFetchRecordsPerShard": PER_SHARD,
        "kinesis.getRecords.fetchIntervalMs": "0",
        "kinesis.clientRetryIntervalsMs": "1",
        "kinesis.clientMaxRetryIntervalMs": "20",
    }


def fixture() -> dict[str, Any]:
    return json.loads((FIXTURE / "fixture.json").read_text())


def committed_batches(checkpoint: Path) -> list[int]:
    return sorted(int(path.name) for path in (checkpoint / "commits").iterdir() if path.name.isdigit())


def copy_fixture(destination: Path) -> tuple[Path, Path]:
    """The stored checkpoint and metadata directory, copied under ``destination`` (see the module doc)."""
    checkpoint, metadata = destination / "checkpoint", destination / "metadata"
    shutil.copytree(FIXTURE / "checkpoint", checkpoint)
    shutil.copytree(FIXTURE / "metadata", metadata)
    stored = fixture()["metadataPath"]
    for path in [*(checkpoint / "offsets").iterdir(), *(metadata / "pending").glob("*.json")]:
        if path.name.startswith(".") or stored not in path.read_text():
            continue
        path.write_text(path.read_text().replace(stored, str(metadata)))
        path.with_name(f".{path.name}.crc").unlink(missing_ok=True)  # Hadoop checks it against the text
    return checkpoint, metadata


def _make(work: Path) -> dict[str, Any]:
    """Run the query of the module doc in ``work``; returns fixture.json's content."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    import pyspark
    from pyspark.sql import SparkSession

    import pyspark_aws_kinesis

    checkpoint, metadata = work / "checkpoint", work / "metadata"
    batches: dict[int, list[str]] = {}

    def keep(frame, batch_id: int) -> None:
        batches[batch_id] = sorted(bytes(row.data).decode() for row in frame.select("data").collect())

    with fixed_clock_stream(work) as (server, sequence_numbers):
        spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        pyspark_aws_kinesis.register(spark)
        query = (
            spark.readStream.format("aws-kinesis")
            .options(**query_options(server, metadata))
            .load()
            .writeStream.foreachBatch(keep)
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="2 seconds")  # a pause after each batch: stopped before the next one
            .start()
        )
        deadline = time.monotonic() + 180
        while not (checkpoint / "commits").exists() or len(committed_batches(checkpoint)) < 2:
            assert time.monotonic() < deadline and query.isActive, "the query did not commit two batches"
            time.sleep(0.05)
        query.stop()
        spark.stop()
    last = committed_batches(checkpoint)[-1]
    for name in (str(last), f".{last}.crc"):  # the driver "died" between the sink and the commit
        (checkpoint / "commits" / name).unlink()
    read = sorted(row for rows in batches.values() for row in rows)
    assert len(read) < RECORDS, "the first run read every record: nothing would be left for the restart"
    return {
        "madeAt": "7965991",
        "pyspark": pyspark.__version__,
        "clockMs": CLOCK_MS,
        "stream": STREAM,
        "metadataPath": str(metadata),
        "sequenceNumbers": sequence_numbers,
        "batches": {str(batch): rows for batch, rows in sorted(batches.items())},
    }


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="stored-checkpoint-") as work:
        made = _make(Path(work))
        shutil.rmtree(FIXTURE, ignore_errors=True)
        FIXTURE.mkdir(parents=True)
        shutil.copytree(Path(work) / "checkpoint", FIXTURE / "checkpoint")
        shutil.copytree(Path(work) / "metadata", FIXTURE / "metadata")
        (FIXTURE / "fixture.json").write_text(json.dumps(made, indent=1) + "\n")
    print(f"wrote {FIXTURE}")


if __name__ == "__main__":
    main()
