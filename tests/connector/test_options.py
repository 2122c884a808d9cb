"""options: parsing, validation messages, "did you mean", secrets kept out of text, the generated docs table."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from pyspark_aws_kinesis import options as opts
from pyspark_aws_kinesis.aws.settings import ClientSettings, infer_region, is_loopback
from pyspark_aws_kinesis.options import OptionError, Side, parse_options
from pyspark_aws_kinesis.options.docs import render_markdown

ROOT = Path(__file__).resolve().parents[2]


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


@pytest.mark.parametrize("side", [Side.SOURCE, Side.SINK])
def test_a_stream_arn_is_not_supported_yet_and_the_hint_says_what_to_use(side: Side) -> None:
    arn = "arn:aws:kinesis:us-east-1:123456789012:stream/s"
    with pytest.raises(OptionError) as error:
        parse_options({"kinesis.streamName": "s", "kinesis.streamARN": arn}, side)
    message = str(error.value)
    assert message.startswith("unknown option 'kinesis.streamarn': reading a stream by ARN (kinesis.streamARN) is not ")
    assert "not supported yet" in message and "kinesis.streamName" in message and "\n" not in message


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


def test_keys_must_come_in_pairs() -> None:
    parsed = parse_options({"kinesis.awsAccessKeyId": "AKID", "kinesis.region": "eu-west-1"}, Side.SOURCE)
    with pytest.raises(OptionError, match="must be given together"):
        ClientSettings.from_options(parsed)


def test_retry_intervals_must_be_ordered() -> None:
    parsed = parse_options(
        {
            "kinesis.clientRetryIntervalsMs": "500",
            "kinesis.clientMaxRetryIntervalMs": "100",
            "kinesis.region": "us-east-1",
        },
        Side.SOURCE,
    )
    with pytest.raises(OptionError, match=r"kinesis\.clientRetryIntervalsMs=500 must not exceed"):
        ClientSettings.from_options(parsed)


@pytest.mark.parametrize(
    ("endpoint", "region"),
    [
        ("https://kinesis.us-west-2.amazonaws.com", "us-west-2"),
        ("kinesis.eu-central-1.amazonaws.com", "eu-central-1"),
        ("https://kinesis-fips.us-gov-west-1.amazonaws.com", "us-gov-west-1"),
        ("https://kinesis.cn-north-1.amazonaws.com.cn", "cn-north-1"),
        ("http://127.0.0.1:4567", "us-east-1"),
        ("http://localhost:4567", "us-east-1"),
        ("https://vpce-123.example.com", None),
        (None, None),
    ],
)
def test_region_inferred_from_endpoint(endpoint: str | None, region: str | None) -> None:
    assert infer_region(endpoint) == region


@pytest.mark.parametrize(
    ("endpoint", "loopback"),
    [
        ("http://127.0.0.1:4567", True),
        ("http://127.3.2.1:4567", True),
        ("http://[::1]:4567", True),
        ("localhost:4567", True),
        ("http://127.example.com:4567", False),  # a name that starts like a loopback address is not one
        ("https://kinesis.us-east-1.amazonaws.com", False),
        ("", False),
        (None, False),
    ],
)
def test_loopback_endpoints_are_told_by_address_not_by_prefix(endpoint: str | None, loopback: bool) -> None:
    assert is_loopback(endpoint) is loopback


def test_region_option_wins_over_endpoint() -> None:
    parsed = parse_options(
        {"kinesis.endpointUrl": "https://kinesis.us-west-2.amazonaws.com", "kinesis.region": "eu-west-1"}, Side.BOTH
    )
    assert ClientSettings.from_options(parsed).region == "eu-west-1"


def test_side_filters_options() -> None:
    sink_side = parse_options({"kinesis.maxFetchRecordsPerShard": "7"}, Side.SINK)
    assert opts.MAX_FETCH_RECORDS_PER_SHARD.key not in sink_side
    assert sink_side[opts.STREAM_NAME.key] is None


def test_every_option_is_documented_and_valid() -> None:
    for option in opts.REGISTRY.values():
        assert option.doc.strip() and option.kind.allowed
        assert option.name.lower().startswith("kinesis.")


def test_options_doc_is_up_to_date() -> None:
    committed = (ROOT / "docs" / "options.md").read_text()
    assert committed == render_markdown(), "run: python -m pyspark_aws_kinesis.options > docs/options.md"


def test_every_option_named_in_the_source_docs_exists() -> None:
    import re

    text = (ROOT / "docs" / "source.md").read_text()
    named = set(re.findall(r"`(kinesis\.[A-Za-z.]+)`", text)) | set(re.findall(r'"(kinesis\.[A-Za-z.]+)"', text))
    assert named, "the docs name options"
    assert sorted(name for name in named if name.lower() not in opts.REGISTRY) == []


def test_region_that_cannot_be_found_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    parsed = parse_options({"kinesis.endpointUrl": "https://vpce-1.example.com"}, Side.SOURCE)
    with pytest.raises(OptionError, match=r"option kinesis.region is not set and cannot be inferred"):
        ClientSettings.from_options(parsed)


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
        ("streamARN", "kinesis.streamName"),  # Databricks, the AWS connector
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


def test_check_new_record_threads_is_parsed_into_the_settings() -> None:
    from pyspark_aws_kinesis.source.settings import SourceSettings

    def settings(**extra: str) -> SourceSettings:
        return SourceSettings.from_options({"kinesis.streamName": "s", "kinesis.region": "us-east-1", **extra})

    assert settings().probe_threads == 8
    assert settings(**{"kinesis.checkNewRecordThreads": "3"}).probe_threads == 3
    with pytest.raises(OptionError, match=r"checkNewRecordThreads='0' is invalid: allowed is an integer from 1"):
        settings(**{"kinesis.checkNewRecordThreads": "0"})


@pytest.mark.parametrize(
    "text",
    [
        "AT_TIMESTAMP 2026-11-22T08:00:00Z",  # the AWS connector's form
        "AT_TIMESTAMP:2026-11-22T08:00:00Z",
        "at_timestamp  2026-11-22T09:00:00+01:00",
    ],
)
def test_starting_position_accepts_the_aws_connectors_at_timestamp_form(text: str) -> None:
    """The AWS connector documents `AT_TIMESTAMP YYYY-MM-DDTHH:MM:SSZ` (a space); ours is `AT_TIMESTAMP:`."""
    from datetime import UTC, datetime

    from pyspark_aws_kinesis.positions import AT_TIMESTAMP, parse_starting_position

    parsed = parse_options({"kinesis.startingPosition": text}, Side.SOURCE)
    position = parse_starting_position(parsed[opts.STARTING_POSITION.key]).default
    assert position.kind == AT_TIMESTAMP
    assert position.timestamp_ms == int(datetime(2026, 11, 22, 8, tzinfo=UTC).timestamp() * 1000)
