"""Credentials in Spark queries (``pyspark_aws_kinesis.aws``): bad credential options fail at ``load()`` naming the
option, a streaming query and the sink sign every Kinesis call with the assumed role, the role is refreshed while a
query runs, and planted secrets appear in no output file, progress report or error.

What the clients really sent is read off the wire: recording proxies (``localaws.fault_proxy``) in front of
kinesalite and of moto's STS keep each request's SigV4 ``Credential=<key id>/<date>/<region>/<service>``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from localaws import LocalServer
from localaws.streams import read_stream
from pyspark_aws_kinesis.aws.credentials import REFRESH_WINDOW_ENV
from pyspark_aws_kinesis.kpl import deaggregate, is_aggregated
from tests.connector.support.credentials_util import (
    BASE_KEY_ID,
    ROLE_ARN,
    _base_source_options,
    _is_assumed_role_key,
    recording_proxies,
    role_options,
    signing_keys,
)
from tests.connector.support.source_util import FORMAT, put_numbered, source_options, wait_for

APP = Path(__file__).resolve().parents[1] / "support" / "kinesis_query_app.py"


@pytest.mark.slow
def test_bad_credential_options_fail_at_load(spark, tmp_path) -> None:
    for extra, named in (
        ({"kinesis.stsRoleArn": "arn:aws:iam::1234:role/x"}, "kinesis.stsRoleArn='arn:aws:iam::1234:role/x'"),
        ({"kinesis.stsSessionName": "alone"}, "kinesis.stsSessionName has no effect without option kinesis.stsRole"),
        ({"kinesis.stsExternalId": "lone-ext-id"}, "kinesis.stsExternalId has no effect without option"),
        ({"kinesis.stsRoleArn": ROLE_ARN, "kinesis.stsDurationSec": "60"}, "kinesis.stsDurationSec='60' is inv"),
        ({"kinesis.endpointUrl": "http://user:pw-in-url@127.0.0.1:1"}, "kinesis.endpointUrl=<secret> is invalid"),
    ):
        with pytest.raises(Exception) as info:
            spark.readStream.format(FORMAT).options(**{**_base_source_options(tmp_path), **extra}).load()
        assert named in str(info.value)
        assert "lone-ext-id" not in str(info.value) and "pw-in-url" not in str(info.value)


# --- Spark: a streaming query reads and writes through the role -------------------------------------------------


@pytest.mark.slow
def test_streaming_query_and_sink_sign_every_kinesis_call_with_the_role(
    spark, kinesalite: LocalServer, moto: LocalServer, lite_stream, tmp_path
) -> None:
    source, target = lite_stream(shards=4), lite_stream(shards=1)
    sent = put_numbered(kinesalite, source, "q", 120, keys=5)
    with recording_proxies(kinesalite, moto) as proxies:
        # pyspark 4.2+ runs several AvailableNow batches under maxRecordsPerTrigger: more tasks per process.
        read_options = {
            **source_options(kinesalite, source, tmp_path / "meta", **{"kinesis.maxRecordsPerTrigger": "40"}),
            **role_options(proxies, **{"kinesis.stsSessionName": "reads"}),
        }
        write_options = {**role_options(proxies, **{"kinesis.stsSessionName": "writes"}), "kinesis.streamName": target}
        query = (
            spark.readStream.format(FORMAT)
            .options(**read_options)
            .load()
            .writeStream.format(FORMAT)
            .options(**write_options)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert query.exception() is None
        calls = proxies.kinesis_requests()
        actions = Counter(call.action for call in calls)
        assert actions["PutRecords"] >= 1 and actions["GetShardIterator"] >= 4  # one read task per shard at least
        assert all(_is_assumed_role_key(call.access_key_id) for call in calls), signing_keys(calls)
        # One AssumeRole per Python process and settings, not one per task or client: the driver-side source
        # process plus the task workers Spark forked (up to 4 seen with local[2]); the per-process test above
        # counts it exactly.
        assume_roles = proxies.assume_roles()
        assert signing_keys(assume_roles) == {BASE_KEY_ID}
        sessions = Counter(dict(call.form)["RoleSessionName"] for call in assume_roles)
        assert set(sessions) == {"reads", "writes"}
        assert sessions["reads"] <= 5 and sessions["writes"] <= 4, sessions
        assert actions["GetRecords"] + actions["PutRecords"] > sum(sessions.values())
    delivered = []
    for record in read_stream(kinesalite.client("kinesis"), target):
        data = record["Data"]
        delivered += [user.data for user in deaggregate(data)] if is_aggregated(data) else [data]
    # pyspark 4.0.2 runs AvailableNow as one batch, which maxRecordsPerTrigger cuts short: compare with what was read.
    read = sum(progress["numInputRows"] for progress in query.recentProgress)
    assert read >= 40 and len(delivered) == read and set(delivered) <= set(sent)


# --- refresh while a query runs ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_role_is_refreshed_while_a_query_runs(kinesalite: LocalServer, moto: LocalServer, lite_stream, tmp_path):
    stream = lite_stream(shards=1)
    first = put_numbered(kinesalite, stream, "before", 10, keys=5)
    with recording_proxies(kinesalite, moto) as proxies:
        options = {
            **source_options(kinesalite, stream, tmp_path / "meta"),
            **role_options(proxies),
            "kinesis.stsDurationSec": "900",
        }
        # 900 s credentials refreshed when 897 s are left: a new AssumeRole about every 3 s.
        env = {**os.environ, REFRESH_WINDOW_ENV: "897"}
        output, log = tmp_path / "out", tmp_path / "app.log"
        with log.open("w") as log_file:
            app = subprocess.Popen(
                [sys.executable, str(APP), json.dumps(options), str(output), str(tmp_path / "checkpoint")],
                env=env,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_for(lambda: _rows(output) >= set(first), timeout_s=300, what=f"first records (log: {log})")
            # Without refreshes each process would sign with one key for good, and local[2] runs a handful of
            # Python processes: 8 different keys means the role was assumed again and again.
            wait_for(lambda: len(signing_keys(proxies.kinesis_requests())) >= 8, timeout_s=120, what="8 refreshed keys")
            second = put_numbered(kinesalite, stream, "after", 10, keys=5)
            wait_for(lambda: _rows(output) >= set(first + second), timeout_s=120, what="records after the refresh")
        finally:
            app.kill()
            app.wait(30)
        keys = [call.access_key_id for call in proxies.kinesis_requests()]
        assert all(_is_assumed_role_key(key) for key in keys)
        assert keys[-1] != keys[0] and len(proxies.assume_roles()) >= 8


def _rows(output: Path) -> set[bytes]:
    import pyarrow.parquet as pq

    found: set[bytes] = set()
    for file in output.glob("*.parquet") if output.exists() else []:
        try:
            found.update(pq.read_table(file)["data"].to_pylist())
        except Exception:  # a file still being written
            continue
    return found


# --- secrets never leave ----------------------------------------------------------------------------------------

SECRET_APP = Path(__file__).resolve().parents[1] / "support" / "credentials_app.py"


@pytest.mark.slow
def test_planted_secrets_appear_in_no_output_file_progress_or_error(
    kinesalite: LocalServer, moto: LocalServer, lite_stream, tmp_path
) -> None:
    plant = "Pl4nted" + os.urandom(6).hex()  # in every credential option and credential variable, nowhere else
    source, target = lite_stream(shards=2), lite_stream(shards=1)
    put_numbered(kinesalite, source, "s", 40, keys=5)
    work = tmp_path / "work"
    options = {
        **source_options(kinesalite, source, work / "metadata"),
        "kinesis.endpointUrl": kinesalite.endpoint_url,
        "kinesis.awsAccessKeyId": f"AKIA{plant}",
        "kinesis.awsSecretKey": f"{plant}-secret-key",
        "kinesis.sessionToken": f"{plant}-session-token",
        "kinesis.stsRoleArn": ROLE_ARN,
        "kinesis.stsExternalId": f"{plant}-external-id",
        "kinesis.stsEndpointUrl": moto.endpoint_url,
        "kinesis.clientNumRetries": "0",
    }
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": f"AKIA{plant}env",
        "AWS_SECRET_ACCESS_KEY": f"{plant}-env-secret",
        "AWS_SESSION_TOKEN": f"{plant}-env-token",
    }
    app = subprocess.run(
        [sys.executable, str(SECRET_APP), json.dumps(options), target, str(work)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out, err = app.stdout, app.stderr
    assert app.returncode == 0 and "DONE" in out, err[-3000:]
    # The runs really happened: progress JSON, a failure naming the role, rows on the target stream.
    progress = [line for line in out.splitlines() if line.startswith("PROGRESS")]
    assert progress and any('"numInputRows" : 40' in line or '"numInputRows": 40' in line for line in progress)
    assert f"AssumeRole of role {ROLE_ARN}" in out.partition("FAILED")[2]
    assert len(read_stream(kinesalite.client("kinesis"), target)) >= 1
    assert plant not in out, _around(out, plant)
    assert plant not in err, _around(err, plant)
    files = [path for path in work.rglob("*") if path.is_file()]
    assert any("checkpoint" in str(path) for path in files) and any("metadata" in str(path) for path in files)
    for path in files:
        assert plant.encode() not in path.read_bytes(), path


def _around(text: str, needle: str) -> str:
    at = text.find(needle)
    return text[max(0, at - 300) : at + 100]
