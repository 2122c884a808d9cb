"""options: parsing, validation messages, "did you mean", secrets kept out of text, the generated docs table."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from connector import options as opts
from connector.aws import ClientSettings, infer_region
from connector.options import OptionError, Side, parse_options

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
        {"kinesis.clientRetryIntervalsMs": "500", "kinesis.clientMaxRetryIntervalMs": "100", "kinesis.region": "x"},
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
    assert committed == opts.render_markdown(), "run: python -m connector.options > docs/options.md"


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
