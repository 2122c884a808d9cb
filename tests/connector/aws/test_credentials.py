"""Credentials from ``pyspark_aws_kinesis.aws``: an assumed role with an external ID signs every Kinesis call, the
application's own keys only ever reach STS, the role is assumed once per process, ``kinesis.kinesisRegion`` is the
region Kinesis calls are signed for, and bad credential options are refused naming the option without echoing a
secret. The same inside Spark queries: tests/connector/queries/test_credentials.py.

What the clients really sent is read off the wire: recording proxies (``localaws.fault_proxy``) in front of
kinesalite and of moto's STS keep each request's SigV4 ``Credential=<key id>/<date>/<region>/<service>``.
moto's AssumeRole answers ``ASIA...`` keys for any role and external ID, so the assertions are about which keys
signed what, and what reached STS."""

from __future__ import annotations

import pickle
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from localaws import LocalServer
from pyspark_aws_kinesis.aws.clients import kinesis_client, kinesis_reader_client
from pyspark_aws_kinesis.aws.credentials import AssumeRoleError, explain_assume_role_failure
from pyspark_aws_kinesis.aws.settings import ClientSettings
from pyspark_aws_kinesis.options import OptionError, Side, parse_options
from tests.connector.support.credentials_util import (
    BASE_KEY_ID,
    EXTERNAL_ID,
    ROLE_ARN,
    _base_source_options,
    _is_assumed_role_key,
    recording_proxies,
    role_options,
    signing_keys,
)
from tests.connector.support.source_util import put_numbered, reader, run_batch, source_options

ROOT = Path(__file__).resolve().parents[3]


# --- the role signs Kinesis, the base keys sign STS -------------------------------------------------------------


def test_reader_signs_every_kinesis_call_with_the_assumed_role_in_the_kinesis_region(
    kinesalite: LocalServer, moto: LocalServer, lite_stream, tmp_path
) -> None:
    stream = lite_stream(shards=2)
    sent = put_numbered(kinesalite, stream, "r", 30, keys=5)
    with recording_proxies(kinesalite, moto) as proxies:
        options = source_options(kinesalite, stream, tmp_path / "meta")
        options.update(
            role_options(proxies, **{"kinesis.region": "us-east-1", "kinesis.kinesisRegion": "eu-west-2"}),
            **{"kinesis.stsSessionName": "reader-session", "kinesis.stsDurationSec": "1800"},
        )
        source = reader(options)
        _, rows = run_batch(source, source.initialOffset())
        assert sorted(bytes(row["data"]) for row in rows) == sorted(sent)

        kinesis_calls = proxies.kinesis_requests()
        assert {call.action for call in kinesis_calls} >= {"ListShards", "GetShardIterator", "GetRecords"}
        assert all(_is_assumed_role_key(call.access_key_id) for call in kinesis_calls), signing_keys(kinesis_calls)
        assert {(call.region, call.service) for call in kinesis_calls} == {("eu-west-2", "kinesis")}
        (assume,) = proxies.assume_roles()  # planner and the (pickled) executor copy share this process's role
        assert (assume.access_key_id, assume.region, assume.service) == (BASE_KEY_ID, "us-east-1", "sts")
        sent_params = dict(assume.form)
        assert {
            key: sent_params.get(key) for key in ("RoleArn", "ExternalId", "RoleSessionName", "DurationSeconds")
        } == {
            "RoleArn": ROLE_ARN,
            "ExternalId": EXTERNAL_ID,
            "RoleSessionName": "reader-session",
            "DurationSeconds": "1800",
        }


def test_without_a_role_the_base_keys_sign_kinesis_and_sts_is_never_called(
    kinesalite: LocalServer, moto: LocalServer, lite_stream
) -> None:
    stream = lite_stream()
    with recording_proxies(kinesalite, moto) as proxies:
        options = {k: v for k, v in role_options(proxies).items() if not k.startswith("kinesis.sts")}
        settings = ClientSettings.from_options(parse_options({**options, "kinesis.streamName": stream}, Side.BOTH))
        kinesis_client(settings).list_shards(StreamName=stream)
        assert signing_keys(proxies.kinesis_requests()) == {BASE_KEY_ID}
        assert proxies.sts.requests() == []


def _role_settings(**extra: str) -> ClientSettings:
    """Settings with base keys and the role, no server needed."""
    base = {"kinesis.region": "us-east-1", "kinesis.awsAccessKeyId": BASE_KEY_ID, "kinesis.awsSecretKey": "s"}
    return ClientSettings.from_raw({**base, "kinesis.stsRoleArn": ROLE_ARN, **extra})


def test_the_metadata_store_settings_keep_the_application_credentials() -> None:
    settings = _role_settings()
    assert settings.role is not None and settings.role.role_arn == ROLE_ARN
    own = settings.without_role()
    assert own.role is None and (own.access_key_id, own.region) == (BASE_KEY_ID, "us-east-1")


def test_default_session_name_names_the_stream_and_is_valid_for_sts() -> None:
    name = _role_settings(**{"kinesis.streamName": "orders,refunds"}).role.session_name
    assert name.startswith("aws-kinesis-orders-") and 2 <= len(name) <= 64
    parse_options({"kinesis.stsRoleArn": ROLE_ARN, "kinesis.stsSessionName": name}, Side.BOTH)  # STS's rules
    assert len(_role_settings(**{"kinesis.streamName": "s" * 128}).role.session_name) <= 64


# --- once per process ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_one_assume_role_per_process_for_many_clients_threads_and_task_copies(
    kinesalite: LocalServer, moto: LocalServer, lite_stream
) -> None:
    stream = lite_stream()
    with recording_proxies(kinesalite, moto) as proxies:
        raw = {**role_options(proxies), "kinesis.streamName": stream, "kinesis.region": "us-east-1"}
        settings = ClientSettings.from_options(parse_options(raw, Side.BOTH))
        copies = [pickle.loads(pickle.dumps(settings)) for _ in range(4)]  # as tasks unpickle them

        def calls(copy: ClientSettings) -> None:
            for make in (kinesis_client, kinesis_reader_client):
                for _ in range(3):
                    make(copy).list_shards(StreamName=stream)

        threads = [threading.Thread(target=calls, args=(copy,)) for copy in copies]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(proxies.kinesis_requests()) == 24
        assert len(proxies.assume_roles()) == 1

        # Each other process assumes it once more, whatever its number of clients and calls.
        blob = pickle.dumps(settings).hex()
        script = (
            "import pickle, sys\nfrom pyspark_aws_kinesis.aws.clients import kinesis_client, kinesis_reader_client\n"
            "settings = pickle.loads(bytes.fromhex(sys.argv[1]))\n"
            "for _ in range(5):\n"
            "    kinesis_client(settings).list_shards(StreamName=sys.argv[2])\n"
            "    kinesis_reader_client(pickle.loads(pickle.dumps(settings))).list_shards(StreamName=sys.argv[2])\n"
        )
        for _ in range(2):
            subprocess.run([sys.executable, "-c", script, blob, stream], cwd=ROOT, check=True, timeout=60)
        assert len(proxies.assume_roles()) == 3
        assert all(_is_assumed_role_key(call.access_key_id) for call in proxies.kinesis_requests())


def test_options_parsed_again_without_a_session_name_reuse_the_client_and_the_role(
    kinesalite: LocalServer, moto: LocalServer, lite_stream
) -> None:
    """Each foreachBatch write, each restart of a query in a long-lived application, parses the options again: with
    a role and no ``kinesis.stsSessionName``, the same settings, so the same client and one AssumeRole (a new
    session name each time made a new client and a new AssumeRole in every process, kept for its life)."""
    stream = lite_stream()
    with recording_proxies(kinesalite, moto) as proxies:
        raw = {**role_options(proxies), "kinesis.streamName": stream, "kinesis.region": "us-east-1"}
        raw.pop("kinesis.stsSessionName", None)
        parsed = [ClientSettings.from_options(parse_options(raw, Side.BOTH)) for _ in range(3)]
        for settings in parsed:
            kinesis_client(settings).list_shards(StreamName=stream)
        assert len({id(kinesis_client(settings)) for settings in parsed}) == 1
        assert len(proxies.assume_roles()) == 1
        assert parsed[0].role is not None and parsed[0].role.session_name.startswith(f"aws-kinesis-{stream}-")


# --- errors ---------------------------------------------------------------------------------------------------


def test_assume_role_failure_names_the_role_and_what_failed_without_secrets(
    kinesalite: LocalServer, lite_stream
) -> None:
    stream = lite_stream()
    secret, external_id = "base-secret-never-shown", "external-id-never-shown"
    raw = {
        "kinesis.streamName": stream,
        "kinesis.region": "us-east-1",
        "kinesis.endpointUrl": kinesalite.endpoint_url,
        "kinesis.awsAccessKeyId": BASE_KEY_ID,
        "kinesis.awsSecretKey": secret,
        "kinesis.sessionToken": "session-token-never-shown",
        "kinesis.stsRoleArn": ROLE_ARN,
        "kinesis.stsExternalId": external_id,
        "kinesis.stsEndpointUrl": "http://127.0.0.1:9",  # nothing listens there
        "kinesis.clientNumRetries": "0",
    }
    settings = ClientSettings.from_options(parse_options(raw, Side.BOTH))
    with pytest.raises(AssumeRoleError) as info:
        kinesis_client(settings).list_shards(StreamName=stream)
    message = str(info.value)
    assert f"AssumeRole of role {ROLE_ARN}" in message and "EndpointConnectionError" in message
    assert "http://127.0.0.1:9" in message
    for hidden in (secret, external_id, "session-token-never-shown"):
        assert hidden not in message and hidden not in repr(settings) and hidden not in settings.where()


def test_aws_error_codes_are_explained_and_redacted() -> None:
    from botocore.exceptions import ClientError

    settings = _role_settings(**{"kinesis.awsSecretKey": "s3cr3t-value", "kinesis.stsExternalId": "ext-value-1"})
    for code, expected in (
        ("AccessDenied", "external ID (kinesis.stsExternalId"),
        ("ExpiredToken", "session token has expired"),
        ("ValidationError", "kinesis.stsDurationSec"),
    ):
        # An AWS message that (unlike AWS's) echoes secrets: it must come out redacted.
        error = ClientError({"Error": {"Code": code, "Message": "echo ext-value-1 s3cr3t-value"}}, "AssumeRole")
        message = explain_assume_role_failure(settings, error)
        assert f"role {ROLE_ARN}" in message and code in message and expected in message
        assert "ext-value-1" not in message and "s3cr3t-value" not in message


LONE_TOKEN = {"kinesis.sessionToken": "lone-token", "kinesis.awsAccessKeyId": None, "kinesis.awsSecretKey": None}


@pytest.mark.parametrize(
    ("extra", "named", "hidden"),
    [
        ({"kinesis.stsRoleArn": "arn:aws:iam::1234:role/x"}, "kinesis.stsRoleArn='arn:aws:iam::1234:role/x'", None),
        ({"kinesis.stsRoleArn": "arn:aws:s3:::bucket"}, "allowed is an IAM role ARN", None),
        ({"kinesis.stsSessionName": "alone"}, "kinesis.stsSessionName has no effect without option", None),
        ({"kinesis.stsExternalId": "lone-ext-id"}, "kinesis.stsExternalId has no effect without", "lone-ext-id"),
        ({"kinesis.stsRoleArn": ROLE_ARN, "kinesis.stsDurationSec": "899"}, "from 900 to 43200", None),
        ({"kinesis.stsRoleArn": ROLE_ARN, "kinesis.stsDurationSec": "43201"}, "kinesis.stsDurationSec", None),
        ({"kinesis.stsRoleArn": ROLE_ARN, "kinesis.stsSessionName": "a b"}, "2-64 characters", None),
        ({"kinesis.stsRoleArn": ROLE_ARN, "kinesis.stsExternalId": "x"}, "kinesis.stsExternalId=<secret>", None),
        (
            {"kinesis.sessionToken": "lone-token", "kinesis.awsAccessKeyId": None, "kinesis.awsSecretKey": None},
            "kinesis.sessionToken has no effect without",
            "lone-token",
        ),
        ({"kinesis.endpointUrl": "http://user:pw-in-url@127.0.0.1:1"}, "kinesis.endpointUrl=<secret>", "pw-in-url"),
        (
            {"kinesis.stsRoleArn": ROLE_ARN, "kinesis.stsEndpointUrl": "https://u:pw-in-sts@sts.amazonaws.com"},
            "kinesis.stsEndpointUrl=<secret> is invalid (it holds user info",
            "pw-in-sts",
        ),
        ({"kinesis.metadataPath": "hdfs://u:pw-in-path@nn:8020/m"}, "kinesis.metadataPath=<secret>", "pw-in-path"),
        ({"kinesis.kinesisRegion": "Europe"}, "kinesis.kinesisRegion='Europe' is invalid", None),
    ],
)
def test_bad_credential_options_are_refused_naming_the_option(
    tmp_path, extra: dict[str, str | None], named: str, hidden: str | None
) -> None:
    # A None in ``extra`` removes that option.
    options = {k: v for k, v in {**_base_source_options(tmp_path), **extra}.items() if v is not None}
    sides = [Side.SOURCE] + ([Side.SINK] if "kinesis.metadataPath" not in extra else [])  # the sink's too
    for side in sides:
        with pytest.raises(OptionError) as info:
            parse_options(options, side)
        assert named in str(info.value)
        if hidden:
            assert hidden not in str(info.value)
