"""The source inside Spark: schema, multi-stream rows, restart from a checkpoint and SIGKILL of the driver with
a file sink (every record exactly once, by content; metadata in a path store and in DynamoDB; read through
GetRecords and through SubscribeToShard), batch reads, and
option errors at load() / start().

A SIGKILL of a query reading through GetRecords lands while one of its calls is under way at kinesalite, on every
run: the server holds the query's GetRecords (``localaws.gate``) until the kill, and the test checks that the
server saw the client hang up and served on (tests/conftest.py fails the test if a server died)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from localaws import KINESALITE, LocalServer
from localaws.gate import gate, held_calls
from localaws.streams import put_records, read_stream, unique_name
from pyspark_aws_kinesis.source.offsets import KinesisOffset, parse_offset
from tests.connector.queries.query_util import _committed
from tests.connector.support.efo_util import efo_options
from tests.connector.support.source_util import (
    FORMAT,
    format_1_json,
    memory_query,
    records_and_a_cut,
    source_options,
    start_parquet_query,
    wait_for,
)

APP = Path(__file__).resolve().parents[1] / "support" / "kinesis_query_app.py"
EXPECTED_SCHEMA = (
    "struct<data:binary,streamName:string,partitionKey:string,sequenceNumber:string,subSequenceNumber:bigint,"
    "shardId:string,approximateArrivalTimestamp:timestamp>"
)


def _put(server: LocalServer, stream: str, prefix: str, count: int) -> list[bytes]:
    data = [f"{prefix}-{i:05d}".encode() for i in range(count)]
    put_records(server.client("kinesis"), stream, [(item, f"key-{i % 13}") for i, item in enumerate(data)])
    return data


def test_stream_rows_schema_and_multiple_streams(spark, kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    first, second = lite_stream(shards=2), lite_stream(shards=1)
    produced = {first: _put(kinesalite, first, "one", 25), second: _put(kinesalite, second, "two", 5)}
    frame = spark.readStream.format(FORMAT).options(**source_options(kinesalite, f"{first}, {second}", tmp_path)).load()
    assert frame.schema.simpleString() == EXPECTED_SCHEMA
    query = memory_query(frame, "source_rows", tmp_path / "checkpoint")
    try:
        wait_for(lambda: spark.table("source_rows").count() >= 30, what="30 rows in the memory sink")
        rows = spark.table("source_rows").collect()
    finally:
        query.stop()
    assert len(rows) == 30
    by_stream = {stream: sorted(bytes(r.data) for r in rows if r.streamName == stream) for stream in produced}
    assert by_stream == {stream: sorted(data) for stream, data in produced.items()}
    stored = {record["SequenceNumber"]: record for record in read_stream(kinesalite.client("kinesis"), first)}
    for row in rows:
        if row.streamName == first:
            record = stored[row.sequenceNumber]
            assert (bytes(row.data), row.partitionKey, row.subSequenceNumber) == (
                record["Data"],
                record["PartitionKey"],
                0,
            )
            assert row.shardId.startswith("shardId-")
            arrival = record["ApproximateArrivalTimestamp"].timestamp()
            assert abs(row.approximateArrivalTimestamp.timestamp() - arrival) < 0.002


def test_restart_from_checkpoint_reads_every_record_once(spark, kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    stream = lite_stream(shards=2)
    produced = _put(kinesalite, stream, "a", 120)
    options = source_options(kinesalite, stream, tmp_path / "meta", **{"kinesis.maxFetchRecordsPerShard": "10"})
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def start(**changed: str):
        return start_parquet_query(spark, {**options, **changed}, output, checkpoint)

    query = start()
    wait_for(lambda: len(_committed(spark, output)) >= 40, what="some batches committed")
    query.stop()
    assert len(_committed(spark, output)) < len(produced)  # stopped mid-stream
    produced += _put(kinesalite, stream, "b", 40)
    query = start(**{"kinesis.startingPosition": "LATEST"})  # the checkpoint wins over a changed start
    try:
        wait_for(lambda: len(_committed(spark, output)) >= len(produced), what="every record after the restart")
    finally:
        query.stop()
    assert sorted(_committed(spark, output)) == sorted(produced)


def test_restarts_leave_a_bounded_store(spark, kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    """Five starts on one checkpoint, more batches after each: the metadata store keeps
    kinesis.minBatchesToRetain batches and at most as many pending documents (pyspark 4.0.2 writes one per start;
    4.2+ none), not one per start."""
    stream = lite_stream(shards=1)
    meta = tmp_path / "meta"
    options = source_options(
        kinesalite, stream, meta, **{"kinesis.maxFetchRecordsPerShard": "5", "kinesis.minBatchesToRetain": "2"}
    )
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    produced: list[bytes] = []
    for start in range(5):
        produced += _put(kinesalite, stream, f"s{start}", 20)  # at least 4 batches of 5
        query = start_parquet_query(spark, options, output, checkpoint)
        try:
            expected = len(produced)
            wait_for(lambda: len(_committed(spark, output)) >= expected, what=f"every record of start {start}")  # noqa: B023
        finally:
            query.stop()
    assert sorted(_committed(spark, output)) == sorted(produced)
    # kinesis.minBatchesToRetain, plus the last batch: Spark commits it to the source only when it plans the next
    bound = 2 + 1
    (source_dir,) = [path for path in meta.iterdir() if path.name != "pending"]
    assert len([path for path in source_dir.iterdir() if path.name.isdigit()]) <= bound
    pending = [path.name for path in (meta / "pending").glob("*.json") if not path.name.startswith("source-")]
    assert len(pending) <= bound, pending  # one per restart before: 4


def _metadata_options(store: str, request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """Options for the metadata store: a local path, or a fresh DynamoDB table on moto (created by the source)."""
    if store == "path":
        return {"kinesis.metadataPath": str(tmp_path / "meta")}
    moto: LocalServer = request.getfixturevalue("moto")
    return {
        "kinesis.metadataCommitterType": "DYNAMODB",
        "kinesis.dynamodb.tableName": unique_name("meta"),
        "kinesis.dynamodb.endpointUrl": moto.endpoint_url,
    }


def _server_options(consumer: str, request: pytest.FixtureRequest) -> tuple[LocalServer, str, dict[str, str]]:
    """A server, a fresh two-shard stream on it and the source options for the consumer type: GetRecords on
    kinesalite, SubscribeToShard on kinesis-mock (kinesalite has no enhanced fan-out); no metadata store yet."""
    if consumer == "GetRecords":
        server, stream = request.getfixturevalue("kinesalite"), request.getfixturevalue("lite_stream")(shards=2)
        options = source_options(server, stream, "")
    else:
        server, stream = request.getfixturevalue("kinesis_mock"), request.getfixturevalue("mock_stream")(shards=2)
        options = efo_options(server, stream, "")
    del options["kinesis.metadataPath"]
    return server, stream, options


def _launch(options: dict[str, str], output: Path, checkpoint: Path) -> subprocess.Popen:
    """The query of ``kinesis_query_app.py`` in its own process group: SIGKILL (``_kill``) takes the Python driver and
    its JVM down at once, like a lost machine."""
    command = [sys.executable, str(APP), json.dumps(options), str(output), str(checkpoint)]
    return subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _kill(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):  # already killed
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(30)


def _kill_mid_call(process: subprocess.Popen, server: LocalServer) -> None:
    """SIGKILL the query while kinesalite holds one of its GetRecords calls, and see kinesalite notice the hang-up
    (kinesis-mock, for SubscribeToShard, is killed on as it runs)."""
    if server.spec is not KINESALITE:
        _kill(process)
        return
    hung_up = gate(server).hung_up
    with held_calls(server, "GetRecords"):
        wait_for(lambda: gate(server).held >= 1 or process.poll() is not None, timeout_s=60, what="a GetRecords call")
        assert process.poll() is None, process.stderr.read().decode()[-3000:] if process.stderr else ""
        _kill(process)
        wait_for(lambda: gate(server).hung_up > hung_up, timeout_s=30, what="kinesalite to see the client hang up")


def _batches_done(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.exists() else 0


def _restart_until_every_record(
    server: LocalServer, options: dict[str, str], output: Path, checkpoint: Path, produced: list[bytes]
) -> None:
    """Start the query again from its checkpoint, wait until the sink committed as many records as ``produced``,
    kill it in the middle of a call, and check that it committed each of them exactly once."""
    second = _launch(options, output, checkpoint)
    try:
        wait_for(
            lambda: len(_committed(None, output)) >= len(produced) or second.poll() is not None,
            timeout_s=120,
            what="every record after the restart",
        )
        assert second.poll() is None, second.stderr.read().decode()[-3000:] if second.stderr else ""
        _kill_mid_call(second, server)
    finally:
        _kill(second)
    assert sorted(_committed(None, output)) == sorted(produced)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("store", "consumer"), [("path", "GetRecords"), ("dynamodb", "GetRecords"), ("path", "SubscribeToShard")]
)
def test_sigkill_of_the_driver_then_restart_reads_every_record_once(
    spark, tmp_path, store: str, consumer: str, request: pytest.FixtureRequest
) -> None:
    server, stream, options = _server_options(consumer, request)
    produced = _put(server, stream, "before", 100)
    # A backlog across several batches; fewer with kinesis-mock, which refuses a resubscription for ~5 s.
    options["kinesis.maxFetchRecordsPerShard"] = "20" if consumer == "GetRecords" else "40"
    options.update(_metadata_options(store, request, tmp_path))
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    batches_done = functools.partial(_batches_done, checkpoint)

    # Records keep arriving before, during and after the kill: until two rounds after it, however long a loaded
    # machine takes over the batches before it.
    during: list[bytes] = []
    killed = threading.Event()

    def produce() -> None:
        rounds_after_kill = 0
        for round_ in range(400):
            during.extend(_put(server, stream, f"during-{round_}", 10))
            rounds_after_kill += killed.is_set()
            if rounds_after_kill == 2:
                return
            time.sleep(0.25 if consumer == "GetRecords" else 1.0)  # kinesis-mock's resubscriptions take ~5 s

    producer = threading.Thread(target=produce)
    first = _launch(options, output, checkpoint)
    try:
        wait_for(lambda: batches_done() >= 1 or first.poll() is not None, timeout_s=120, what="a first batch")
        assert first.poll() is None, first.stderr.read().decode()[-3000:] if first.stderr else ""
        producer.start()
        wait_for(lambda: batches_done() >= 2, timeout_s=60, what="another batch")
        assert producer.is_alive(), "the producer must still be running when the driver dies"
        _kill_mid_call(first, server)
    finally:
        _kill(first)
        killed.set()
    producer.join()
    produced += during + _put(server, stream, "stopped", 30)  # while no driver runs
    _restart_until_every_record(server, options, output, checkpoint, produced)


def _to_format_1(checkpoint: Path, metadata: Path, output: Path) -> list[int]:
    """Rewrite a stopped query's offsets (and pyspark 4.0.2's pending resolutions) in format 1, as the connector
    before format 2 wrote them, and undo its last batch's commit and sink entry, as if the driver died right after
    planning it: the restart replays that batch from format-1 offsets. Returns the rewritten batch ids."""
    rewritten = []
    for path in sorted((checkpoint / "offsets").iterdir(), key=lambda p: p.name):
        if not path.name.isdigit():
            continue
        lines = path.read_text().split("\n")  # "v1", Spark's batch metadata, then the source's offset
        offset = parse_offset(lines[2])
        if isinstance(offset, KinesisOffset):
            path.write_text("\n".join([*lines[:2], format_1_json(offset), *lines[3:]]))
            (path.parent / f".{path.name}.crc").unlink(missing_ok=True)  # Spark checks it against the text
            rewritten.append(int(path.name))
    for path in (metadata / "pending").glob("*.json"):
        body = json.loads(path.read_text())
        if "pending" not in body and body.get("v") == 2:  # a resolution of a pending offset
            path.write_text(format_1_json(parse_offset(body)))  # type: ignore[arg-type]
    last = max(int(p.name) for p in (checkpoint / "offsets").iterdir() if p.name.isdigit())
    for log in (checkpoint / "commits", output / "_spark_metadata"):
        (log / str(last)).unlink(missing_ok=True)
        (log / f".{last}.crc").unlink(missing_ok=True)
    return rewritten


@pytest.mark.slow
def test_restart_from_a_checkpoint_in_offset_format_1_reads_every_record_once(
    kinesalite: LocalServer, lite_stream, tmp_path: Path
) -> None:
    """Checkpoints written before format 2 resume exactly: batches in format 1 replay, and the next ones plan
    from them (in format 2)."""
    stream = lite_stream(shards=2)
    produced = _put(kinesalite, stream, "before", 80)
    options = source_options(kinesalite, stream, tmp_path / "meta", **{"kinesis.maxFetchRecordsPerShard": "10"})
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    first = _launch(options, output, checkpoint)
    try:
        wait_for(lambda: _batches_done(checkpoint) >= 2 or first.poll() is not None, timeout_s=120, what="2 batches")
        assert first.poll() is None, first.stderr.read().decode()[-3000:] if first.stderr else ""
        _kill_mid_call(first, kinesalite)
    finally:
        _kill(first)
    rewritten = _to_format_1(checkpoint, tmp_path / "meta", output)
    assert rewritten, "the query planned batches"
    assert len(_committed(None, output)) < len(produced)  # stopped mid-stream
    produced += _put(kinesalite, stream, "after", 30)
    _restart_until_every_record(kinesalite, options, output, checkpoint, produced)
    offsets = {
        int(p.name): p.read_text().split("\n")[2] for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()
    }
    assert all(json.loads(offsets[batch])["v"] == 1 for batch in rewritten)  # Spark keeps what it wrote
    after = [json.loads(offsets[batch])["v"] for batch in offsets if batch > max(rewritten)]
    assert 2 in after, after  # planned on the new code (pyspark 4.0.2's first one after a start is pending: 1)


# --- batch reads --------------------------------------------------------------------------------------------


def test_batch_read_reads_to_the_tip(spark, kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    stream = lite_stream(shards=2)
    produced = _put(kinesalite, stream, "a", 40)
    options = source_options(kinesalite, stream, tmp_path)
    del options["kinesis.startingPosition"]  # a batch read starts at TRIM_HORIZON by default
    rows = spark.read.format(FORMAT).options(**options).load().collect()
    assert sorted(bytes(row.data) for row in rows) == sorted(produced)


def test_batch_read_stops_at_the_ending_position(spark, kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    stream = lite_stream(shards=1)
    _put(kinesalite, stream, "a", 10)
    records = read_stream(kinesalite.client("kinesis"), stream)
    shard = "shardId-000000000000"
    ending = json.dumps({shard: {"type": "AT_SEQUENCE_NUMBER", "sequenceNumber": records[6]["SequenceNumber"]}})
    starting = json.dumps({shard: {"type": "AFTER_SEQUENCE_NUMBER", "sequenceNumber": records[1]["SequenceNumber"]}})
    options = source_options(
        kinesalite, stream, tmp_path, **{"kinesis.startingPosition": starting, "kinesis.endingPosition": ending}
    )
    rows = spark.read.format(FORMAT).options(**options).load().collect()
    assert [bytes(row.data) for row in rows] == [record["Data"] for record in records[2:7]]


def test_at_timestamp_picks_exactly_the_records_at_or_after(
    spark, kinesis_mock: LocalServer, mock_stream, tmp_path
) -> None:
    stream = mock_stream(shards=1)
    records, cut = records_and_a_cut(kinesis_mock, stream)
    options = source_options(
        kinesis_mock, stream, tmp_path, **{"kinesis.startingPosition": f"AT_TIMESTAMP:{cut.isoformat()}"}
    )
    rows = spark.read.format(FORMAT).options(**options).load().collect()
    assert [bytes(row.data) for row in rows] == [r["Data"] for r in records if r["ApproximateArrivalTimestamp"] >= cut]


# --- errors ---------------------------------------------------------------------------------------------------


def test_bad_option_fails_at_load_naming_it(spark, kinesalite: LocalServer, tmp_path) -> None:
    options = source_options(kinesalite, "s", tmp_path, **{"kinesis.maxFetchRecordsPerShard": "-5"})
    with pytest.raises(Exception, match=r"kinesis.maxFetchRecordsPerShard='-5' is invalid: allowed is an integer >= 1"):
        spark.readStream.format(FORMAT).options(**options).load()
    with pytest.raises(
        Exception, match=r"unknown option 'kinesis.startingposiiton'; did you mean kinesis.startingPosition"
    ):
        spark.readStream.format(FORMAT).options(**{**options, "kinesis.startingPosiiton": "LATEST"}).load()


def test_missing_stream_is_a_clear_error_at_start(spark, kinesalite: LocalServer, tmp_path) -> None:
    options = source_options(kinesalite, "no-such-stream", tmp_path)
    frame = spark.readStream.format(FORMAT).options(**options).load()
    query = frame.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "cp")).start()
    try:
        with pytest.raises(Exception, match=r"stream 'no-such-stream' \(option kinesis.streamName\) does not exist"):
            query.awaitTermination(60)
    finally:
        query.stop()


def test_register_is_harmless_when_pyspark_found_the_source_itself(
    spark, kinesalite: LocalServer, lite_stream, tmp_path
) -> None:
    """The checkout's ``pyspark_aws_kinesis`` is on the driver's path here, as an installed wheel is on EMR: pyspark
    registered ``aws-kinesis`` by itself, and pyspark 4.0.2 refuses a second registration of the name. The jobs
    call ``pyspark_aws_kinesis.register`` anyway (for ``--py-files`` users): it must not fail, and the source must
    work."""
    import pyspark_aws_kinesis

    pyspark_aws_kinesis.register(spark)
    pyspark_aws_kinesis.register(spark)
    stream = lite_stream(shards=1)
    put_records(kinesalite.client("kinesis"), stream, [(b"once", "k")])
    rows = spark.read.format(FORMAT).options(**source_options(kinesalite, stream, tmp_path / "meta")).load().collect()
    assert [bytes(row.data) for row in rows] == [b"once"]
