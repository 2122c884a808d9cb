"""The option registry (``pyspark_aws_kinesis.options.registry``): parsing, validation messages, "did you mean" (also
for names pasted from other connectors' docs), secrets kept out of text, each side's options, and endpoint options:
https URLs (plain http only to a loopback host, or with ``kinesis.allowHttpEndpoints``) without user info."""

from __future__ import annotations

import pickle
import re

import pytest

from pyspark_aws_kinesis import options as opts
from pyspark_aws_kinesis.aws.settings import ClientSettings
from pyspark_aws_kinesis.options import OptionError, Side, parse_options


def test_defaults_and_case_insensitive_names() -> None:
    parsed = parse_options({"KINESIS.STREAMNAME": "s", "kinesis.maxfetchrecordspershard": "5"}, Side.SOURCE)
    assert parsed["kinesis.streamName"] == "s"
    assert parsed[opts.MAX_FETCH_RECORDS_PER_SHARD.key] == 5
    assert parsed[opts.RECORDS_PER_FETCH.key] == 10000
    assert parsed[opts.DESCRIBE_SHARD_INTERVAL.key] == 1.0
    assert parsed.is_set("kinesis.streamName") and not parsed.is_set("kinesis.region")


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("kinesis.failOnDataLoss", "TRUE", True),
        ("kinesis.consumerType", "getrecords", "GetRecords"),
        ("kinesis.describeShardInterval", "500ms", 0.5),
        ("kinesis.describeShardInterval", "2m", 120.0),
        ("kinesis.describeShardInterval", "3", 3.0),
        ("kinesis.startingPosition", " trim_horizon ", "trim_horizon"),
    ],
)
def test_values_are_parsed(name: str, value: str, expected: object) -> None:
    assert parse_options({name: value}, Side.SOURCE)[name] == expected


@pytest.mark.parametrize(
    ("name", "value", "allowed"),
    [
        ("kinesis.maxFetchRecordsPerShard", "0", "an integer >= 1"),
        ("kinesis.getRecords.numberOfRecordsPerFetch", "10001", "from 1 to 10000"),
        ("kinesis.failOnDataLoss", "yes", "true or false"),
        ("kinesis.consumerType", "Polling", "one of GetRecords, SubscribeToShard"),
        ("kinesis.describeShardInterval", "soon", "a duration"),
        ("kinesis.startingPosition", "NEWEST", "LATEST, TRIM_HORIZON"),
        ("kinesis.startingPosition", "AT_TIMESTAMP:2026-01-01T00:00:00", "no UTC offset"),
    ],
)
def test_bad_value_names_option_value_and_allowed(name: str, value: str, allowed: str) -> None:
    with pytest.raises(OptionError) as error:
        parse_options({name: value}, Side.SOURCE)
    message = str(error.value)
    assert name in message and repr(value) in message and allowed in message


def test_unknown_option_suggests_the_closest_name() -> None:
    with pytest.raises(OptionError, match=r"unknown option 'kinesis.streamnmae'; did you mean kinesis.streamName\?"):
        parse_options({"kinesis.streamNmae": "s"}, Side.SOURCE)


def test_every_problem_is_reported_at_once_and_other_keys_ignored() -> None:
    with pytest.raises(OptionError) as error:
        parse_options({"kinesis.foo": "1", "kinesis.minBatchesToRetain": "1", "checkpointLocation": "/x"}, Side.SOURCE)
    assert "kinesis.foo" in str(error.value) and "kinesis.minBatchesToRetain" in str(error.value)
    assert "checkpointLocation" not in str(error.value)


def test_secrets_stay_out_of_errors_and_reprs() -> None:
    with pytest.raises(OptionError) as error:
        parse_options({"kinesis.awsSecretKey": " "}, Side.SOURCE)
    assert "<secret>" in str(error.value)
    parsed = parse_options(
        {"kinesis.awsAccessKeyId": "AKIDSECRET1", "kinesis.awsSecretKey": "SECRET2", "kinesis.region": "eu-west-1"},
        Side.SOURCE,
    )
    settings = ClientSettings.from_options(parsed)
    text = repr(parsed) + repr(settings) + str(settings)
    assert "AKIDSECRET1" not in text and "SECRET2" not in text
    assert pickle.loads(pickle.dumps(settings)) == settings


def test_side_filters_options() -> None:
    sink_side = parse_options({"kinesis.maxFetchRecordsPerShard": "7"}, Side.SINK)
    assert opts.MAX_FETCH_RECORDS_PER_SHARD.key not in sink_side
    assert sink_side[opts.STREAM_NAME.key] is None


# --- names pasted from other connectors' docs, the probe pool size, the AWS connector's AT_TIMESTAMP form ------


@pytest.mark.parametrize(
    ("name", "suggested"),
    [
        ("streamName", "kinesis.streamName"),  # ours / qubole / Databricks without the prefix
        ("region", "kinesis.region"),
        ("endpointUrl", "kinesis.endpointUrl"),
        ("awsAccessKeyId", "kinesis.awsAccessKeyId"),
        ("awsSecretKey", "kinesis.awsSecretKey"),
        ("startingPosition", "kinesis.startingPosition"),
        ("initialPosition", "kinesis.startingPosition"),  # Databricks
        ("endpoint", "kinesis.endpointUrl"),  # Databricks
        ("awsAccessKey", "kinesis.awsAccessKeyId"),  # Databricks
        ("streamARN", "kinesis.streamARN"),  # Databricks, the AWS connector
        ("maxRecordsPerFetch", "kinesis.getRecords.numberOfRecordsPerFetch"),  # Databricks
        ("shardsPerTask", "kinesis.shardsPerPartition"),  # Databricks
        ("failOnDataLoss", "kinesis.failOnDataLoss"),  # Kafka / qubole habit
        ("checkNewRecordThreads", "kinesis.checkNewRecordThreads"),
    ],
)
def test_a_known_name_without_the_prefix_fails_with_did_you_mean(name: str, suggested: str) -> None:
    for side in (Side.SOURCE, Side.SINK):
        with pytest.raises(OptionError) as error:
            parse_options({"kinesis.streamName": "s", name: "x"}, side)
        assert f"option {name!r} is not read by aws-kinesis" in str(error.value)
        assert str(error.value).endswith(f"did you mean `{suggested}`?")


@pytest.mark.parametrize("name", ["roleArn", "roleExternalId", "roleSessionName", "awsSTSRoleARN"])
def test_role_names_from_other_connectors_fail_with_our_role_option_when_there_is_one(name: str) -> None:
    """Databricks' and qubole's role names: the hint names our role option once one is registered."""
    with pytest.raises(OptionError) as error:
        parse_options({name: "arn:aws:iam::123456789012:role/r"}, Side.SOURCE)
    message = str(error.value)
    assert "did you mean `kinesis.sts" in message or "has no equivalent in aws-kinesis yet" in message, message


def test_qubole_prefixed_names_point_at_ours() -> None:
    with pytest.raises(OptionError, match=r"did you mean kinesis.maxFetchTimePerShardSec\?"):
        parse_options({"kinesis.executor.maxFetchTimeInMs": "1000"}, Side.SOURCE)


@pytest.mark.parametrize(
    "name", ["path", "checkpointLocation", "queryName", "mergeSchema", "maxFilesPerTrigger", "spark.foo", "x"]
)
def test_spark_and_unrelated_options_stay_untouched(name: str) -> None:
    for side in (Side.SOURCE, Side.SINK):
        parsed = parse_options({"kinesis.streamName": "s", name: "/some/where"}, side)
        assert parsed["kinesis.streamName"] == "s"


def test_every_problem_including_pasted_names_is_reported_at_once() -> None:
    with pytest.raises(OptionError) as error:
        parse_options({"streamName": "s", "region": "eu-west-1", "kinesis.minBatchesToRetain": "1"}, Side.SOURCE)
    message = str(error.value)
    assert "`kinesis.streamName`" in message and "`kinesis.region`" in message and "minBatchesToRetain" in message


ENDPOINT_OPTIONS = (
    "kinesis.endpointUrl",
    "kinesis.stsEndpointUrl",
    "kinesis.metadata.s3EndpointUrl",
    "kinesis.dynamodb.endpointUrl",
)
NEEDS = {"kinesis.stsEndpointUrl": {"kinesis.stsRoleArn": "arn:aws:iam::123456789012:role/reader"}}


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
