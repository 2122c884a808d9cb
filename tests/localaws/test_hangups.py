"""Every local server, and the quota proxy, keeps serving when a client dies mid-request or mid-answer (a SIGKILLed
driver or worker, a read timeout, an abandoned read-ahead), and a server that dies anyway is reported once, by
name, with its log."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from botocore.config import Config

from localaws import KINESALITE, LocalAws, LocalServer, aws_client
from localaws.quota_model import ManualClock
from localaws.quota_proxy import QuotaProxy
from localaws.streams import create_stream, unique_name

CLIENT = Path(__file__).with_name("hangup_client.py")
ROOT = Path(__file__).resolve().parents[2]
BIG = 900_000  # bytes per record: under the 1 MiB record limit of kinesis-mock
RECORDS = 9  # ~8 MB of data, ~11 MB of JSON in one GetRecords answer: far more than socket buffers hold


def _hang_up(endpoint: str, service: str, method: str, path: str, target: str, body: bytes, when: str, tmp_path):
    """Run the hang-up client against ``endpoint`` until it says ready, then SIGKILL it."""
    body_file = tmp_path / f"body-{when}"
    body_file.write_bytes(body)
    args = [endpoint, service, method, path, target, str(body_file) if body else "-", when]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    client = subprocess.Popen([sys.executable, str(CLIENT), *args], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert client.stdout.readline().strip() == "ready", "the client did not get to its hang-up point"
    finally:
        client.send_signal(signal.SIGKILL)
        client.wait(10)


def _kinesis_hangups(server: LocalServer, tmp_path: Path, endpoint: str | None = None) -> tuple[str, str]:
    """Hang up on ``endpoint`` (default: the server's) mid-body and mid-answer; returns the stream and iterator."""
    endpoint = endpoint or server.endpoint_url
    kinesis = server.client("kinesis")
    stream = create_stream(kinesis, unique_name("hangup"), 1)
    data = os.urandom(BIG)
    for _ in range(RECORDS // 3):  # kinesalite refuses a request body over ~7 MB
        kinesis.put_records(StreamName=stream, Records=[{"Data": data, "PartitionKey": "k"}] * 3)
    shard = kinesis.list_shards(StreamName=stream)["Shards"][0]["ShardId"]
    # Through the endpoint: a quota proxy learns which shard the iterator reads.
    iterator = aws_client("kinesis", endpoint).get_shard_iterator(
        StreamName=stream, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
    )
    put = {"StreamName": stream, "Records": [{"Data": base64.b64encode(data).decode(), "PartitionKey": "k"}] * 2}
    get = {"ShardIterator": iterator["ShardIterator"], "Limit": 10000}
    target = "Kinesis_20131202."
    _hang_up(endpoint, "kinesis", "POST", "/", target + "PutRecords", json.dumps(put).encode(), "mid-body", tmp_path)
    _hang_up(endpoint, "kinesis", "POST", "/", target + "GetRecords", json.dumps(get).encode(), "mid-answer", tmp_path)
    # Another client is served, and nothing of the half-sent PutRecords was stored.
    records = kinesis.get_records(ShardIterator=iterator["ShardIterator"], Limit=10000)["Records"]
    assert len(records) == RECORDS
    return stream, iterator["ShardIterator"]


def _s3_hangups(server: LocalServer, tmp_path: Path) -> None:
    s3 = server.client("s3")
    bucket = unique_name("hangup")
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="big", Body=os.urandom(RECORDS * BIG))
    _hang_up(server.endpoint_url, "s3", "PUT", f"/{bucket}/half", "", os.urandom(RECORDS * BIG), "mid-body", tmp_path)
    _hang_up(server.endpoint_url, "s3", "GET", f"/{bucket}/big", "", b"", "mid-answer", tmp_path)
    assert len(s3.get_object(Bucket=bucket, Key="big")["Body"].read()) == RECORDS * BIG
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["big"]


@pytest.mark.parametrize("server_name", ["kinesalite", "kinesis-mock", "moto"])
def test_server_survives_clients_killed_mid_request_and_mid_answer(local_aws, server_name: str, tmp_path) -> None:
    server: LocalServer = local_aws[server_name]
    pid = server.pid
    (_s3_hangups if server_name == "moto" else _kinesis_hangups)(server, tmp_path)
    assert server.exit_code() is None and server.pid == pid, server.log_tail()


def test_the_quota_proxy_survives_clients_killed_mid_request_and_mid_answer(kinesalite: LocalServer, tmp_path):
    with QuotaProxy(kinesalite.endpoint_url, clock=ManualClock()) as proxy:
        stream, iterator = _kinesis_hangups(kinesalite, tmp_path, proxy.endpoint_url)
        via_proxy = aws_client("kinesis", proxy.endpoint_url, config=Config(retries={"total_max_attempts": 1}))
        assert len(via_proxy.list_shards(StreamName=stream)["Shards"]) == 1
        # The abandoned answer was paid for (~8 MB on the shard's 2 MiB/s, and the proxy's clock stands still).
        with pytest.raises(via_proxy.exceptions.ProvisionedThroughputExceededException):
            via_proxy.get_records(ShardIterator=iterator)
        # The half-sent PutRecords was neither counted nor forwarded (no call above passes the proxy untouched).
        assert proxy.report().tally(stream=stream, action="PutRecords").calls == 0 and proxy.stats["forwarded"] == 0


def test_a_dead_server_is_reported_by_name_with_its_log_and_restarted_on_its_port(tmp_path) -> None:
    with LocalAws([KINESALITE], log_dir=tmp_path) as aws:
        server = aws.kinesalite
        port, dead_pid = server.port, server.pid
        assert aws.restart_dead() == []
        os.killpg(dead_pid, signal.SIGKILL)
        server.process.wait(10)

        reports = aws.restart_dead()

        assert len(reports) == 1
        assert reports[0].startswith(f"local server kinesalite (pid {dead_pid}, http://127.0.0.1:{port}) exited")
        assert "kinesalite listening on 127.0.0.1" in reports[0]  # the dead server's log tail
        assert server.port == port and server.pid != dead_pid
        assert server.client("kinesis").list_streams()["StreamNames"] == []
        assert aws.restart_dead() == []
