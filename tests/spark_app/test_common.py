"""The jobs' shared plumbing: command line, stop marker (local and S3), SIGTERM, stopping between batches,
and the dead-letter writer."""

from __future__ import annotations

import base64
import json
import os
import signal
import time
from pathlib import Path

import pytest

from spark_app import common, country_counts, fan_out, word_count
from spark_app.events import parse_events

REQUIRED = ["--source-stream", "src", "--region", "us-east-1", "--checkpoint-location", "/tmp/ck"]


def parse(module, extra: list[str], needs_sink=True):
    return common.parse_job_args(module.parser(), [*REQUIRED, *extra], needs_sink=needs_sink)


def usage_error(capsys, module, extra: list[str], needs_sink=True) -> str:
    with pytest.raises(SystemExit) as exit_info:
        parse(module, extra, needs_sink)
    assert exit_info.value.code == common.EXIT_USAGE
    return capsys.readouterr().err


def test_defaults_derive_the_dead_letter_path_and_a_processing_time_trigger():
    args = parse(country_counts, ["--sink-stream", "out", "--starting-position", "latest"])
    assert args.dead_letter_path == "/tmp/ck-dead-letter"
    assert args.starting_position == "LATEST"
    assert common.trigger_of(args) == {"processingTime": "10 seconds"}
    assert common.checkpoint_of(args, "counts") == "/tmp/ck/counts"
    assert common.trigger_of(parse(country_counts, ["--sink-stream", "o", "--available-now"])) == {"availableNow": True}


def test_options_reach_source_and_sink_with_the_connector_names():
    args = parse(
        country_counts,
        ["--sink-stream", "out", "--endpoint-url", "http://127.0.0.1:1", "--sink-option", "kinesis.x=1"],
    )
    assert common.sink_options(args) == {
        "kinesis.region": "us-east-1",
        "kinesis.endpointUrl": "http://127.0.0.1:1",
        "kinesis.streamName": "out",
        "kinesis.x": "1",
    }


def test_source_options_bound_a_batch_by_the_trigger_and_let_the_user_override_any_of_them():
    args = parse(country_counts, ["--sink-stream", "o", "--trigger-seconds", "0.2"])
    assert common.source_options(args, "counts") == {
        "kinesis.region": "us-east-1",
        "kinesis.streamName": "src",
        "kinesis.startingPosition": "TRIM_HORIZON",
        "kinesis.metadataPath": "/tmp/ck/counts/kinesis-metadata",
        "kinesis.maxFetchTimePerShardSec": "1",
    }
    assert "kinesis.maxFetchTimePerShardSec" not in common.source_options(
        parse(country_counts, ["--sink-stream", "o", "--available-now"]), "counts"
    )
    custom = parse(country_counts, ["--sink-stream", "o", "--source-option", "kinesis.MAXFETCHTIMEPERSHARDSEC=30"])
    options = common.source_options(custom, "counts")
    assert options["kinesis.MAXFETCHTIMEPERSHARDSEC"] == "30" and "kinesis.maxFetchTimePerShardSec" not in options


def test_metadata_table_puts_the_source_metadata_in_dynamodb():
    args = parse(country_counts, ["--sink-stream", "o", "--metadata-table", "meta"])
    options = common.source_options(args, "counts")
    assert options["kinesis.metadataCommitterType"] == "DYNAMODB" and options["kinesis.dynamodb.tableName"] == "meta"
    assert "kinesis.metadataPath" not in options
    chosen = parse(country_counts, ["--sink-stream", "o", "--source-option", "kinesis.metadataCommitterType=dynamodb"])
    assert "kinesis.metadataPath" not in common.source_options(chosen, "counts")


def test_a_job_that_writes_to_kinesis_names_the_missing_sink_stream(capsys):
    assert "--sink-stream: missing" in usage_error(capsys, country_counts, [])
    # word_count needs it only for Kinesis output.
    predicate = lambda args: args.output == "kinesis"  # noqa: E731
    assert parse(word_count, [], needs_sink=predicate).sink_stream is None
    assert "--sink-stream: missing" in usage_error(capsys, word_count, ["--output", "kinesis"], predicate)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--trigger-seconds", "-1"], "--trigger-seconds: got '-1'; allowed: a number of seconds >= 0"),
        (["--source-option", "region=x"], "allowed: KEY=VALUE with a KEY that starts with 'kinesis.'"),
        (["--starting-position", "AT_TIMESTAMP"], "invalid choice: 'AT_TIMESTAMP'"),
        (["--window-seconds", "0"], "--window-seconds: got '0'; allowed: a whole number of seconds > 0"),
        (["--output-mode", "complete"], "invalid choice: 'complete'"),
    ],
)
def test_bad_values_name_the_option_the_value_and_what_is_allowed(capsys, extra, expected):
    assert expected in usage_error(capsys, country_counts, ["--sink-stream", "o", *extra])


def test_fan_out_has_its_parquet_flag():
    assert parse(fan_out, ["--sink-stream", "o", "--parquet-path", "/p"]).parquet_path == "/p"


def test_a_local_stop_marker_is_seen_and_consumed(tmp_path: Path):
    marker = tmp_path / "job.stop"
    stop = common.StopSignal(common.StopMarker(str(marker)), marker_interval_s=0)
    assert stop.reason() is None
    marker.touch()
    assert stop.reason() == f"stop marker {marker} appeared"
    assert not marker.exists(), "an obeyed marker must be removed so the next run is not stopped by it"


def test_an_s3_stop_marker_is_seen_and_consumed(moto, monkeypatch):
    s3 = moto.client("s3")
    s3.create_bucket(Bucket="jobs")
    # The job's own client: boto3's default chain, pointed at moto the way a user would point it elsewhere.
    for name, value in {"AWS_ENDPOINT_URL_S3": moto.endpoint_url, "AWS_ACCESS_KEY_ID": "testing"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    stop = common.StopSignal(common.StopMarker("s3://jobs/markers/cc.stop", region="us-east-1"), marker_interval_s=0)
    assert stop.reason() is None
    s3.put_object(Bucket="jobs", Key="markers/cc.stop", Body=b"")
    assert stop.reason() == "stop marker s3://jobs/markers/cc.stop appeared"
    assert s3.list_objects_v2(Bucket="jobs").get("KeyCount") == 0


@pytest.mark.parametrize("path", ["s3://", "s3://bucket", "s3://bucket/"])
def test_an_s3_marker_needs_a_bucket_and_key(path):
    with pytest.raises(ValueError, match=r"--stop-marker: got .*allowed: a local path or s3://bucket/key"):
        common.StopMarker(path)


def test_sigterm_becomes_a_stop_request_and_the_handler_is_restored():
    before = signal.getsignal(signal.SIGTERM)
    stop = common.StopSignal()
    restore = stop.install_signal_handlers()
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)  # the handler runs on the main thread at the next bytecode boundary
        assert stop.reason() == "received SIGTERM"
    finally:
        restore()
    assert signal.getsignal(signal.SIGTERM) is before


def _last_batch(checkpoint: Path, log: str) -> int:
    return max((int(p.name) for p in (checkpoint / log).iterdir() if p.name.isdigit()), default=-1)


def _slow_query(spark, checkpoint: Path, batch_s: float, trigger: str):
    """A rate -> foreachBatch query whose batches take ``batch_s``; returns it and the ids of started batches."""
    started: list[int] = []

    def slow_batch(batch, batch_id):
        started.append(batch_id)
        time.sleep(batch_s)

    query = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 5)
        .load()
        .writeStream.foreachBatch(slow_batch)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime=trigger)
        .start()
    )
    return query, started


def _wait_for(predicate, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_stop_asked_during_a_batch_lands_after_it_commits(spark, tmp_path: Path):
    """The stop arrives in the middle of a batch; the query ends with every planned batch committed."""
    query, started = _slow_query(spark, tmp_path / "ck", batch_s=1.0, trigger="3 seconds")
    # From the second batch on, batches are shorter than the interval (the first one also sets things up).
    _wait_for(lambda: len(started) >= 2)
    stop = common.StopSignal()
    stop.request("test asks")
    assert common.run_until_stopped([query], stop, poll_s=0.1) == "test asks"
    assert not query.isActive
    assert _last_batch(tmp_path / "ck", "offsets") == _last_batch(tmp_path / "ck", "commits") == started[-1]


def test_a_failed_query_stops_the_others_and_is_reported(spark, tmp_path: Path):
    def fail(batch, batch_id):
        raise RuntimeError("boom in batch")

    rate = spark.readStream.format("rate").option("rowsPerSecond", 5).load()
    healthy = rate.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "a")).start()
    failing = rate.writeStream.foreachBatch(fail).option("checkpointLocation", str(tmp_path / "b")).start()
    with pytest.raises(common.QueryFailedError, match="boom in batch"):
        common.run_until_stopped([healthy, failing], common.StopSignal(), poll_s=0.1)
    assert not healthy.isActive


def test_dead_letter_writer_routes_each_malformed_record_once_even_when_a_batch_is_replayed(spark, tmp_path: Path):
    rows = [(b'{"id": 1, "data": "Spain", "date": "2026-11-22 08:00:00"}', "k1"), (b"\xffbad", "k2"), (b"{}", "k3")]
    batch = parse_events(spark.createDataFrame(rows, "data binary, partitionKey string"))
    writer = common.DeadLetterWriter(str(tmp_path / "dl"))
    assert writer(batch, 4) == 2
    assert writer(batch, 4) == 2  # Spark replays the batch after a failure
    assert writer.total == 2
    files = list((tmp_path / "dl" / "batch_id=4").glob("*.json"))
    letters = sorted(
        (json.loads(line) for f in files for line in f.read_text().splitlines()), key=lambda r: r["partitionKey"]
    )
    assert [(r["partitionKey"], r["error"], r["batchId"]) for r in letters] == [
        ("k2", "payload: not valid UTF-8", 4),
        ("k3", "id: missing or not an integer", 4),
    ]
    assert base64.b64decode(letters[0]["dataBase64"]) == b"\xffbad"
    assert letters[1]["payload"] == "{}"
    assert writer(batch.where("partitionKey = 'k1'"), 5) == 0
    assert not (tmp_path / "dl" / "batch_id=5").exists()


def test_cloudwatch_is_off_by_default_and_a_bad_namespace_is_named(spark, capsys):
    assert common.publish_metrics(spark, parse(word_count, [], needs_sink=False), "word_count") is None
    assert "--cloudwatch-namespace" in usage_error(capsys, word_count, ["--cloudwatch-namespace", "AWS/Kinesis"])


def test_cloudwatch_namespace_publishes_the_jobs_queries_with_the_job_dimension(spark, moto, monkeypatch):
    # The job's CloudWatch client: boto3's default chain, pointed at moto the way a user would point it elsewhere.
    monkeypatch.setenv("AWS_ENDPOINT_URL_CLOUDWATCH", moto.endpoint_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    namespace = f"Jobs/{os.getpid()}-{time.time_ns()}"
    args = parse(word_count, ["--cloudwatch-namespace", namespace], needs_sink=False)
    listener = common.publish_metrics(spark, args, "word_count")
    cloudwatch = moto.client("cloudwatch")
    query = spark.readStream.format("rate").load().writeStream.format("noop").queryName("cw_job").start()
    try:
        # Until moto holds the metrics: ``calls`` counts a call when it starts, and a loaded machine may not
        # have finished it yet (a CI run beside a benchmark found none).
        _wait_for(lambda: cloudwatch.list_metrics(Namespace=namespace)["Metrics"], timeout_s=120)
    finally:
        query.stop()
        spark.streams.removeListener(listener)
    assert listener.failures == 0
    metrics = cloudwatch.list_metrics(Namespace=namespace)["Metrics"]
    assert {"Name": "Job", "Value": "word_count"} in metrics[0]["Dimensions"]
    assert {"Name": "Query", "Value": "cw_job"} in metrics[0]["Dimensions"]
