"""What the connector prints about endpoints and secrets: ``kinesis.stsExternalId`` is redacted in Spark's plans
(explain()) once the source is registered; every endpoint option is an https URL (plain http only to a loopback
host, or with ``kinesis.allowHttpEndpoints``) without user info; reprs and messages never show user info."""

from __future__ import annotations

import re

import pytest

import pyspark_aws_kinesis
from pyspark_aws_kinesis.aws.settings import AssumeRole, ClientSettings
from pyspark_aws_kinesis.metadata.dynamodb import DynamoDBStore, store_uri
from pyspark_aws_kinesis.options import OptionError, Side, parse_options

EXTERNAL_ID = "external-id-value-1234"
ENDPOINT_OPTIONS = (
    "kinesis.endpointUrl",
    "kinesis.stsEndpointUrl",
    "kinesis.metadata.s3EndpointUrl",
    "kinesis.dynamodb.endpointUrl",
)
NEEDS = {"kinesis.stsEndpointUrl": {"kinesis.stsRoleArn": "arn:aws:iam::123456789012:role/reader"}}


def test_explain_redacts_the_external_id(spark, capsys: pytest.CaptureFixture[str]) -> None:
    spark.conf.unset(pyspark_aws_kinesis.OPTIONS_REDACTION)  # Spark's default: "(?i)url"
    pyspark_aws_kinesis.register(spark)
    options = {
        "kinesis.streamName": "s",
        "kinesis.region": "us-east-1",
        "kinesis.stsRoleArn": "arn:aws:iam::123456789012:role/reader",
        "kinesis.stsExternalId": EXTERNAL_ID,
        "kinesis.endpointUrl": "http://127.0.0.1:4567",
    }
    spark.readStream.format("aws-kinesis").options(**options).load().explain(True)
    plan = capsys.readouterr().out
    assert "kinesis.stsExternalId=*********(redacted)" in plan, plan
    assert EXTERNAL_ID not in plan and "127.0.0.1:4567" not in plan
    pyspark_aws_kinesis.register(spark)  # again: the conf is widened once
    assert spark.conf.get(pyspark_aws_kinesis.OPTIONS_REDACTION).lower().count("externalid") == 1


def _parse(option: str, value: str, **extra: str) -> str:
    return parse_options({option: value, **NEEDS.get(option, {}), **extra}, Side.SOURCE)[option.lower()]


@pytest.mark.parametrize("option", ENDPOINT_OPTIONS)
def test_every_endpoint_needs_https_unless_loopback_or_allowed(option: str) -> None:
    assert _parse(option, "https://vpce-1.kinesis.eu-west-1.vpce.amazonaws.com").startswith("https://")
    for loopback in ("http://127.0.0.1:4567", "http://localhost:4567", "http://[::1]:4567"):
        assert _parse(option, loopback) == loopback
    with pytest.raises(OptionError) as refused:
        _parse(option, "http://kinesis.internal:4567")
    assert str(refused.value) == (
        f"option {option}='http://kinesis.internal:4567' is invalid (plain http to kinesis.internal, which is not a "
        "loopback host): use https://, or set kinesis.allowHttpEndpoints=true to send requests in clear"
    )
    allowed = {"kinesis.allowHttpEndpoints": "true"}
    assert _parse(option, "http://kinesis.internal:4567", **allowed) == "http://kinesis.internal:4567"


@pytest.mark.parametrize("option", ENDPOINT_OPTIONS)
@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("kinesis.internal", "an endpoint is https://<host>[:<port>]"),
        ("ftp://kinesis.internal", "an endpoint is https://<host>[:<port>]"),
        ("https://:443", "an endpoint is https://<host>[:<port>]"),
        ("https://user:hunter2@kinesis.internal", "it holds user info before the host"),
    ],
)
def test_a_malformed_endpoint_is_refused_naming_the_option(option: str, value: str, reason: str) -> None:
    with pytest.raises(
        OptionError, match=f"option {re.escape(option)}=.* is invalid \\({re.escape(reason)}"
    ) as refused:
        _parse(option, value)
    assert "hunter2" not in str(refused.value)


def test_no_repr_or_message_shows_an_endpoints_user_info() -> None:
    """Options refuse user info; settings built in code are shown without it all the same."""
    role = AssumeRole("arn:aws:iam::123456789012:role/r", "s", EXTERNAL_ID, sts_endpoint_url="https://u:pw1@sts.x")
    settings = ClientSettings("eu-west-1", endpoint_url="https://u:pw2@kinesis.x/p", role=role)
    store = DynamoDBStore.from_uri(store_uri("meta", "eu-west-1"), settings, endpoint_url="https://u:pw3@ddb.x")
    shown = " ".join([repr(store), settings.where(), role.describe()])
    assert "https://ddb.x" in shown and "https://kinesis.x/p" in shown and "https://sts.x" in shown
    assert not any(secret in shown for secret in ("pw1", "pw2", "pw3", "u:", EXTERNAL_ID)), shown
