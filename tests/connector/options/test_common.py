"""``options.common``: the options both sides read (the stream, the endpoint and region, credentials and the assumed
role, the AWS client's retries), as registered and as ``parse_options`` applies them.

The expected names, sides, kinds, defaults and bounds are those of docs/options.md; the secrets are those
docs/security.md keeps out of text (the keys, the session token, the external id); the role options are "with
``kinesis.stsRoleArn``" and the session token "with the two key options"; ``kinesis.stsDurationSec`` takes AWS
AssumeRole's range (900 s to 12 h).
"""

from __future__ import annotations

import pytest

from pyspark_aws_kinesis import options as opts
from pyspark_aws_kinesis.options import OptionError, Side, common, parse_options

ROLE = "arn:aws:iam::123456789012:role/stream-reader"

# name -> (type, default) as docs/options.md lists them (None: no value unless given)
DOCUMENTED = {
    "kinesis.streamName": ("string", None),
    "kinesis.streamARN": ("string", None),
    "kinesis.endpointUrl": ("endpoint", None),
    "kinesis.allowHttpEndpoints": ("boolean", False),
    "kinesis.region": ("string", None),
    "kinesis.allowUnknownRegion": ("boolean", False),
    "kinesis.awsAccessKeyId": ("string", None),
    "kinesis.awsSecretKey": ("string", None),
    "kinesis.sessionToken": ("string", None),
    "kinesis.stsRoleArn": ("ARN", None),
    "kinesis.stsSessionName": ("string", None),
    "kinesis.stsExternalId": ("string", None),
    "kinesis.stsDurationSec": ("integer", 3600),
    "kinesis.stsEndpointUrl": ("endpoint", None),
    "kinesis.kinesisRegion": ("region", None),
    "kinesis.clientNumRetries": ("integer", 3),
    "kinesis.clientRetryIntervalsMs": ("integer", 1000),
    "kinesis.clientMaxRetryIntervalMs": ("integer", 10000),
}
SECRETS = {"kinesis.awsAccessKeyId", "kinesis.awsSecretKey", "kinesis.sessionToken", "kinesis.stsExternalId"}
REGISTERED = [value for value in vars(common).values() if isinstance(value, opts.Option)]


def problems(raw: dict[str, str], side: Side = Side.SOURCE) -> str:
    with pytest.raises(OptionError) as info:
        parse_options(raw, side)
    return str(info.value)


def test_the_module_registers_the_documented_options_for_both_sides() -> None:
    assert {option.name for option in REGISTERED} == set(DOCUMENTED)
    for option in REGISTERED:
        assert opts.get(option.name) is option
        assert option.side == Side.BOTH, option.name


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_each_option_has_its_documented_type_and_default(name: str) -> None:
    type_name, default = DOCUMENTED[name]
    option = opts.get(name)
    assert option.kind.type_name == type_name
    for side in (Side.SOURCE, Side.SINK):
        parsed = parse_options({}, side)
        assert parsed[name] == default
        assert not parsed.is_set(name)


@pytest.mark.parametrize("side", [Side.SOURCE, Side.SINK])
def test_both_sides_read_them_by_any_case(side: Side) -> None:
    parsed = parse_options(
        {"KINESIS.STREAMNAME": "orders", "kinesis.clientnumretries": "7", "Kinesis.Region": "eu-west-1"}, side
    )
    assert (parsed["kinesis.streamName"], parsed["kinesis.clientNumRetries"], parsed["kinesis.region"]) == (
        "orders",
        7,
        "eu-west-1",
    )


@pytest.mark.parametrize(
    ("name", "low", "high"),
    [("kinesis.clientNumRetries", 0, 100), ("kinesis.stsDurationSec", 900, 43200)],
)
def test_bounded_integers_take_their_bounds_and_refuse_beyond(name: str, low: int, high: int) -> None:
    extra = {"kinesis.stsRoleArn": ROLE} if name.startswith("kinesis.sts") else {}
    for value in (low, high):
        assert parse_options({name: str(value), **extra}, Side.SINK)[name] == value
    for value in (low - 1, high + 1):
        message = problems({name: str(value), **extra}, Side.SINK)
        assert message == f"option {name}='{value}' is invalid: allowed is an integer from {low} to {high}"


@pytest.mark.parametrize("name", ["kinesis.clientRetryIntervalsMs", "kinesis.clientMaxRetryIntervalMs"])
def test_retry_intervals_take_zero_and_up(name: str) -> None:
    assert parse_options({name: "0"}, Side.SOURCE)[name] == 0
    assert problems({name: "-1"}) == f"option {name}='-1' is invalid: allowed is an integer >= 0"


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_secret_options_never_show_their_values(name: str) -> None:
    assert opts.get(name).secret
    pairs = {"kinesis.sessionToken": {"kinesis.awsAccessKeyId": "AKIDPAIR"}, "kinesis.stsExternalId": {}}
    bad = "has a space and is my secret" if name == "kinesis.stsExternalId" else " "
    message = problems({name: bad, "kinesis.stsRoleArn": ROLE, **pairs.get(name, {})})
    assert f"option {name}=<secret> is invalid" in message and repr(bad) not in message
    assert "my secret" not in message
    good = "abc-123:xyz" if name == "kinesis.stsExternalId" else "SECRETVALUE42"
    parsed = parse_options({name: good, "kinesis.stsRoleArn": ROLE, **pairs.get(name, {})}, Side.SOURCE)
    assert parsed[name] == good and good not in repr(parsed)


def test_other_options_do_show_their_values() -> None:
    assert {option.name for option in REGISTERED if option.secret} == SECRETS
    parsed = parse_options({"kinesis.streamName": "orders", "kinesis.stsRoleArn": ROLE}, Side.SOURCE)
    assert "orders" in repr(parsed) and ROLE in repr(parsed)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("kinesis.stsSessionName", "my-session"),
        ("kinesis.stsExternalId", "partner-1234"),
        ("kinesis.stsDurationSec", "900"),
        ("kinesis.stsEndpointUrl", "https://sts.eu-west-1.amazonaws.com"),
    ],
)
def test_the_role_options_need_the_role(name: str, value: str) -> None:
    message = problems({name: value})
    assert message == f"option {name} has no effect without option kinesis.stsRoleArn: set both"
    assert parse_options({name: value, "kinesis.stsRoleArn": ROLE}, Side.SOURCE).is_set(name)


def test_a_session_token_needs_the_keys() -> None:
    message = problems({"kinesis.sessionToken": "token"})
    assert message == "option kinesis.sessionToken has no effect without option kinesis.awsAccessKeyId: set both"


def test_the_role_must_be_an_iam_role_arn() -> None:
    message = problems({"kinesis.stsRoleArn": "arn:aws:iam::123456789012:user/me"})
    assert message.startswith("option kinesis.stsRoleArn='arn:aws:iam::123456789012:user/me' is invalid")
    assert "allowed is an IAM role ARN" in message


def test_the_kinesis_region_must_look_like_a_region_the_region_need_not() -> None:
    assert parse_options({"kinesis.kinesisRegion": "eu-west-1"}, Side.SOURCE)["kinesis.kinesisRegion"] == "eu-west-1"
    message = problems({"kinesis.kinesisRegion": "Ireland"})
    assert (
        message == "option kinesis.kinesisRegion='Ireland' is invalid: allowed is an AWS region name such as eu-west-1"
    )
    assert parse_options({"kinesis.region": "local"}, Side.SOURCE)["kinesis.region"] == "local"  # a local server's


@pytest.mark.parametrize("name", ["kinesis.endpointUrl", "kinesis.stsEndpointUrl"])
def test_plain_http_only_to_a_loopback_host_unless_allowed(name: str) -> None:
    extra = {"kinesis.stsRoleArn": ROLE} if name == "kinesis.stsEndpointUrl" else {}
    assert parse_options({name: "http://127.0.0.1:4567", **extra}, Side.SOURCE)[name] == "http://127.0.0.1:4567"
    message = problems({name: "http://kinesis.internal:4567", **extra})
    assert f"option {name}='http://kinesis.internal:4567' is invalid (plain http to kinesis.internal" in message
    assert "kinesis.allowHttpEndpoints=true" in message
    allowed = {name: "http://kinesis.internal:4567", "kinesis.allowHttpEndpoints": "true", **extra}
    assert parse_options(allowed, Side.SOURCE)[name] == "http://kinesis.internal:4567"


def test_an_endpoint_with_user_info_is_refused_without_echoing_it() -> None:
    message = problems({"kinesis.endpointUrl": "https://me:hunter2@kinesis.us-east-1.amazonaws.com"})
    assert message.startswith("option kinesis.endpointUrl=<secret> is invalid")
    assert "hunter2" not in message


def test_every_problem_is_reported_at_once() -> None:
    message = problems({"kinesis.clientNumRetries": "many", "kinesis.allowHttpEndpoints": "maybe"}, Side.SINK)
    assert "kinesis.clientNumRetries='many'" in message and "kinesis.allowHttpEndpoints='maybe'" in message
