"""Each local server really serves, and none outlives the process that started it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from localaws import LocalAws, LocalServer
from localaws.servers import KINESALITE_LARGE, aws_client
from localaws.streams import create_stream, list_shard_ids, put_records, read_stream, unique_name

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("server_name", ["kinesis-mock", "kinesalite"])
def test_kinesis_create_put_get(local_aws, server_name: str) -> None:
    server: LocalServer = local_aws[server_name]
    kinesis = server.client("kinesis")
    stream = unique_name("foundation")
    kinesis.create_stream(StreamName=stream, ShardCount=2)
    kinesis.get_waiter("stream_exists").wait(StreamName=stream, WaiterConfig={"Delay": 0.2, "MaxAttempts": 100})
    sent = [(f"record-{i}".encode(), f"key-{i}") for i in range(50)]

    put_records(kinesis, stream, sent)

    got = read_stream(kinesis, stream)
    assert sorted((r["Data"], r["PartitionKey"]) for r in got) == sorted(sent)
    assert len(list_shard_ids(kinesis, stream)) == 2


def test_servers_listen_on_loopback_only(local_aws) -> None:
    for server in local_aws.servers.values():
        assert server.endpoint_url.startswith("http://127.0.0.1:")


class Stopped(Exception):
    pass


def _stop(**_) -> None:
    raise Stopped


def test_clients_share_one_session_yet_keep_their_own_hooks(kinesalite: LocalServer) -> None:
    first, second = kinesalite.client("kinesis"), aws_client("kinesis", kinesalite.endpoint_url)
    # One session reads a service's model once; a session per client read it again (95 ms of CPU each).
    assert first.meta.service_model._service_description is second.meta.service_model._service_description

    first.meta.events.register("before-call.kinesis.ListStreams", _stop)
    with pytest.raises(Stopped):
        first.list_streams()
    assert "StreamNames" in second.list_streams()  # the other client's hook stays its own

    with ThreadPoolExecutor(8) as pool:  # clients made from many threads at once
        answers = list(pool.map(lambda _: kinesalite.client("kinesis").list_streams(), range(16)))
    assert all("StreamNames" in answer for answer in answers)


def test_moto_dynamodb_put_get(moto: LocalServer) -> None:
    dynamodb = moto.client("dynamodb")
    table = unique_name("table")
    dynamodb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb.put_item(TableName=table, Item={"pk": {"S": "a"}, "value": {"N": "42"}})
    item = dynamodb.get_item(TableName=table, Key={"pk": {"S": "a"}})["Item"]
    assert item["value"] == {"N": "42"}


def test_moto_s3_put_get(moto: LocalServer) -> None:
    s3 = moto.client("s3")
    bucket = unique_name("bucket")
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="a/b.txt", Body=b"hello")
    assert s3.get_object(Bucket=bucket, Key="a/b.txt")["Body"].read() == b"hello"


def test_moto_sts_assume_role_gives_working_credentials(moto: LocalServer) -> None:
    iam = moto.client("iam")
    role_arn = iam.create_role(
        RoleName=unique_name("role"),
        AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []}),
    )["Role"]["Arn"]
    creds = moto.client("sts").assume_role(RoleArn=role_arn, RoleSessionName="foundation-test", ExternalId="ext-123")[
        "Credentials"
    ]
    assert creds["AccessKeyId"] != "testing"
    import boto3

    assumed = boto3.session.Session(
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
        region_name="us-east-1",
    ).client("sts", endpoint_url=moto.endpoint_url)
    assert ":assumed-role/" in assumed.get_caller_identity()["Arn"]


CHILD = textwrap.dedent(
    """
    import json, sys, time
    from localaws import LocalAws
    aws = LocalAws().start()
    print(json.dumps(aws.pids()), flush=True)
    if sys.argv[1] == "exit":
        aws.stop()
    else:
        time.sleep(600)
    """
)


def _wait_gone(pids: list[int], timeout_s: float = 15.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in alive if _alive(pid)]
        time.sleep(0.1)
    return alive


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
@pytest.mark.parametrize("ending", ["exit", "sigint", "sigkill"])
def test_no_server_survives_its_starter(ending: str) -> None:
    """Normal stop, Ctrl-C and SIGKILL of the starting process all leave no server behind."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, ending],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        pids = json.loads(child.stdout.readline())
        assert len(pids) == 3 and all(_alive(pid) for pid in pids)
        if ending == "sigint":
            child.send_signal(signal.SIGINT)
        elif ending == "sigkill":
            child.send_signal(signal.SIGKILL)
        child.wait(30)
        assert _wait_gone(pids) == []
    finally:
        child.kill()


def test_kinesalite_answers_at_most_10_mib_saying_more_records_wait(kinesalite: LocalServer, lite_stream) -> None:
    """AWS's GetRecords answers hold at most 10 MiB: twelve records of 1,000,000 bytes come as ten, then two, and
    the cut answer says the shard has more (MillisBehindLatest above 0; kinesalite says 0 for every answer)."""
    stream = lite_stream(shards=1)
    kinesis = kinesalite.client("kinesis")
    for index in range(3):  # four records a call: under kinesalite's 7 MiB a request
        put_records(kinesis, stream, [(bytes([index]) * 1_000_000, f"k{index}-{i}") for i in range(4)])
    shard_id = list_shard_ids(kinesis, stream)[0]
    iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON")
    first = kinesis.get_records(ShardIterator=iterator["ShardIterator"], Limit=100)
    sizes = [len(record["Data"]) + len(record["PartitionKey"]) for record in first["Records"]]
    assert len(sizes) == 10 and sum(sizes) <= 10 * 1024 * 1024 and first["MillisBehindLatest"] > 0
    rest = kinesis.get_records(ShardIterator=first["NextShardIterator"], Limit=100)
    assert len(rest["Records"]) == 2 and rest["MillisBehindLatest"] == 0


def test_kinesalite_for_large_records_takes_them_up_to_10_mib_and_the_default_refuses_them(
    kinesalite: LocalServer, lite_stream, tmp_path
) -> None:
    large = os.urandom(5 * 1024 * 1024)
    refused = kinesalite.client("kinesis")
    with pytest.raises(refused.exceptions.ClientError, match="1048576"):
        refused.put_record(StreamName=lite_stream(shards=1), Data=large, PartitionKey="k")
    with LocalAws([KINESALITE_LARGE], log_dir=tmp_path) as aws:
        kinesis = aws.kinesalite.client("kinesis")
        stream = create_stream(kinesis, unique_name("large"), 1)
        kinesis.put_record(StreamName=stream, Data=large, PartitionKey="k")
        assert [record["Data"] for record in read_stream(kinesis, stream)] == [large]
