"""``pyspark_aws_kinesis.aws.settings.ClientSettings`` from the options: the region inferred from an endpoint (loopback
hosts told by address), the region option first, a clear error when no region can be found, keys in pairs, retry
intervals in order; no repr or message shows an endpoint's user info."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyspark_aws_kinesis.aws.settings import AssumeRole, ClientSettings, infer_region, is_loopback
from pyspark_aws_kinesis.metadata.dynamodb import DynamoDBStore, store_uri
from pyspark_aws_kinesis.options import OptionError, Side, parse_options
from tests.connector.support.redaction_util import EXTERNAL_ID


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


def test_region_that_cannot_be_found_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    parsed = parse_options({"kinesis.endpointUrl": "https://vpce-1.example.com"}, Side.SOURCE)
    with pytest.raises(OptionError, match=r"option kinesis.region is not set and cannot be inferred"):
        ClientSettings.from_options(parsed)


def test_no_repr_or_message_shows_an_endpoints_user_info() -> None:
    """Options refuse user info; settings built in code are shown without it all the same."""
    role = AssumeRole("arn:aws:iam::123456789012:role/r", "s", EXTERNAL_ID, sts_endpoint_url="https://u:pw1@sts.x")
    settings = ClientSettings("eu-west-1", endpoint_url="https://u:pw2@kinesis.x/p", role=role)
    store = DynamoDBStore.from_uri(store_uri("meta", "eu-west-1"), settings, endpoint_url="https://u:pw3@ddb.x")
    shown = " ".join([repr(store), settings.where(), role.describe()])
    assert "https://ddb.x" in shown and "https://kinesis.x/p" in shown and "https://sts.x" in shown
    assert not any(secret in shown for secret in ("pw1", "pw2", "pw3", "u:", EXTERNAL_ID)), shown
