"""``options.kinds``: how a raw option string becomes a value, and what each kind allows in words.

What the kinds promise (the module's docstrings, docs/options.md, docs/security.md "Endpoints"): each kind accepts
what its ``allowed`` text says and refuses the rest; an option's error (``Option.parse``) names the option, the value
and what is allowed; a kind that finds a secret in a value (a URL's ``user:password@``) refuses it without echoing
it. AWS's own formats come from its docs: IAM role ARNs (12-digit account), role session names (2-64 of
``\\w+=,.@-``), external ids (2-1224 of ``\\w+=,.@:/-``).
"""

from __future__ import annotations

import pytest

from pyspark_aws_kinesis.options import OptionError
from pyspark_aws_kinesis.options.kinds import (
    BOOL,
    DURATION,
    ENDPOINT,
    EXTERNAL_ID,
    REGION_NAME,
    ROLE_ARN,
    SESSION_NAME,
    STRING,
    URL,
    HiddenValueError,
    Kind,
    choice,
    integer,
    is_loopback,
)
from pyspark_aws_kinesis.options.registry import Option, Side


def option(kind: Kind, secret: bool = False) -> Option:
    """An option of ``kind``, not registered (the registry is the real options')."""
    return Option("kinesis.testOnly", kind, None, "a test option", Side.BOTH, secret=secret)


def refused(kind: Kind, raw: str, secret: bool = False) -> str:
    with pytest.raises(OptionError) as info:
        option(kind, secret).parse(raw)
    return str(info.value)


# --- booleans and strings --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "value"), [("true", True), ("false", False), ("TRUE", True), (" False ", False)])
def test_a_boolean_is_true_or_false_in_any_case(raw: str, value: bool) -> None:
    assert BOOL.parse(raw) is value


@pytest.mark.parametrize("raw", ["yes", "1", "0", "", "truth", "t"])
def test_other_words_are_not_booleans(raw: str) -> None:
    assert refused(BOOL, raw) == f"option kinesis.testOnly={raw!r} is invalid: allowed is true or false"


def test_a_string_must_not_be_blank() -> None:
    assert STRING.parse("orders") == "orders"
    for raw in ("", "   "):
        assert refused(STRING, raw).endswith("allowed is a non-empty string")


# --- integers ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "allowed"),
    [(integer(900, 43200), "an integer from 900 to 43200"), (integer(0), "an integer >= 0"), (integer(), "an integer")],
)
def test_an_integers_bounds_are_said_in_words(kind: Kind, allowed: str) -> None:
    assert kind.allowed == allowed


def test_an_integers_bounds_are_inclusive() -> None:
    kind = integer(900, 43200)
    assert [kind.parse(raw) for raw in ("900", "43200", " 3600 ")] == [900, 43200, 3600]
    for raw in ("899", "43201"):
        assert (
            refused(kind, raw) == f"option kinesis.testOnly={raw!r} is invalid: allowed is an integer from 900 to 43200"
        )


def test_an_open_bound_allows_anything_on_its_side() -> None:
    assert integer(0).parse("123456789012") == 123456789012
    assert integer().parse("-5") == -5
    assert refused(integer(0), "-1").endswith("allowed is an integer >= 0")


@pytest.mark.parametrize("raw", ["1.5", "ten", "", "1e3", "0x10"])
def test_a_non_integer_is_refused_with_what_is_allowed_not_pythons_words(raw: str) -> None:
    message = refused(integer(0, 100), raw)
    assert message == f"option kinesis.testOnly={raw!r} is invalid: allowed is an integer from 0 to 100"
    assert "invalid literal" not in message


# --- choices ----------------------------------------------------------------------------------------------------


def test_a_choice_matches_in_any_case_and_answers_its_own_spelling() -> None:
    kind = choice("GetRecords", "SubscribeToShard")
    assert kind.allowed == "one of GetRecords, SubscribeToShard"
    assert [kind.parse(raw) for raw in ("getrecords", "SUBSCRIBETOSHARD", " GetRecords ")] == [
        "GetRecords",
        "SubscribeToShard",
        "GetRecords",
    ]


def test_another_word_is_refused_naming_the_choices() -> None:
    message = refused(choice("HDFS", "PATH", "DYNAMODB"), "S3")
    assert message == "option kinesis.testOnly='S3' is invalid: allowed is one of HDFS, PATH, DYNAMODB"


# --- durations --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [
        ("500ms", 0.5),
        ("1s", 1.0),
        ("2m", 120.0),
        ("3", 3.0),  # a bare number means seconds
        ("1.5h", 5400.0),
        ("10 seconds", 10.0),
        ("1 sec", 1.0),
        ("2 min", 120.0),
        ("1 hour", 3600.0),
        ("2 minutes", 120.0),
        ("250MS", 0.25),
        (" 10s ", 10.0),
    ],
)
def test_a_duration_takes_the_usual_units(raw: str, seconds: float) -> None:
    assert DURATION.parse(raw) == pytest.approx(seconds)


@pytest.mark.parametrize("raw", ["", "s", "-1s", "1d", "one second", "1 2", "1s2", "1.s"])
def test_other_durations_are_refused_with_an_example(raw: str) -> None:
    assert refused(DURATION, raw).endswith("allowed is a duration such as 500ms, 1s, 2m (a bare number means seconds)")


# --- URLs and endpoints ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw", ["/tmp/kinesis-metadata", "s3://bucket/prefix", "hdfs://namenode/path", "s3://bucket/odd@name"]
)
def test_a_url_or_path_without_user_info_is_taken(raw: str) -> None:
    assert URL.parse(raw) == raw


@pytest.mark.parametrize(
    "raw", ["s3://AKIDSECRET:hunter2@bucket/prefix", "hdfs://admin:hunter2@namenode/x", "https://token@host/"]
)
def test_user_info_in_a_url_is_refused_without_echoing_it(raw: str) -> None:
    with pytest.raises(HiddenValueError):
        URL.parse(raw)
    message = refused(URL, raw)
    assert "hunter2" not in message and "AKIDSECRET" not in message and "token" not in message
    assert message.startswith("option kinesis.testOnly=<secret> is invalid (it holds user info before the host")


@pytest.mark.parametrize(
    "raw",
    [
        "https://kinesis.us-west-2.amazonaws.com",
        "https://vpce-1234.kinesis.eu-west-1.vpce.amazonaws.com:443/",
        "http://localhost:4567",  # whether http is allowed for the host is the registry's check
        "HTTPS://KINESIS.US-EAST-1.AMAZONAWS.COM",
        "http://[::1]:4567/path",
    ],
)
def test_an_endpoint_is_an_http_or_https_url_with_a_host(raw: str) -> None:
    assert ENDPOINT.parse(raw) == raw


@pytest.mark.parametrize(
    "raw",
    [
        "kinesis.us-east-1.amazonaws.com",  # no scheme
        "ftp://host",
        "https://",  # no host
        "https://host:99999",  # no such port
        "https://host:port",
        "",
    ],
)
def test_other_endpoints_are_refused_with_what_is_allowed(raw: str) -> None:
    assert refused(ENDPOINT, raw).endswith("allowed is an https:// URL (http:// for a loopback host), no user info")


def test_an_endpoint_with_user_info_is_refused_without_echoing_it() -> None:
    message = refused(ENDPOINT, "https://user:hunter2@kinesis.us-east-1.amazonaws.com")
    assert "hunter2" not in message and "user:" not in message
    assert "<secret>" in message


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST", "::1", "127.0.0.1", "127.255.10.2"])
def test_loopback_hosts(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["128.0.0.1", "10.0.0.1", "localhost.example.com", "127.0.0.1.nip.io", "", "::2"])
def test_hosts_that_leave_the_machine(host: str) -> None:
    assert not is_loopback(host)


# --- AWS names --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        "arn:aws:iam::123456789012:role/stream-reader",
        "arn:aws:iam::123456789012:role/team/app/reader",  # a role with a path
        "arn:aws-cn:iam::123456789012:role/reader",
        "arn:aws-us-gov:iam::123456789012:role/reader",
        "arn:aws:iam::123456789012:role/" + "r" * 64,  # role names are at most 64 characters
        "arn:aws:iam::123456789012:role/a+b=c,d.e@f-g_h",
    ],
)
def test_an_iam_role_arn_is_taken(raw: str) -> None:
    assert ROLE_ARN.parse(raw) == raw


@pytest.mark.parametrize(
    "raw",
    [
        "arn:aws:iam::12345678901:role/reader",  # 11 digits
        "arn:aws:iam::123456789012:user/reader",  # a user, not a role
        "arn:aws:iam::123456789012:role/",  # no name
        "arn:aws:iam::123456789012:role/" + "r" * 65,
        "arn:aws:sts::123456789012:assumed-role/reader/session",
        "arn:aws:iam::123456789012:role/bad name",
        "reader",
    ],
)
def test_anything_else_is_not_a_role_arn(raw: str) -> None:
    assert refused(ROLE_ARN, raw).endswith(
        "allowed is an IAM role ARN, arn:<partition>:iam::<12-digit account>:role/<path/name>"
    )


@pytest.mark.parametrize("raw", ["ab", "my-job_1", "a+b=c,d.e@f-g", "s" * 64])
def test_a_role_session_name_is_2_to_64_of_its_characters(raw: str) -> None:
    assert SESSION_NAME.parse(raw) == raw


@pytest.mark.parametrize("raw", ["a", "s" * 65, "has space", "a:b", "a/b"])
def test_other_session_names_are_refused(raw: str) -> None:
    assert refused(SESSION_NAME, raw).endswith("allowed is 2-64 characters of A-Z a-z 0-9 _ + = , . @ -")


@pytest.mark.parametrize("raw", ["ab", "urn:partner:1234/abc", "x" * 1224])
def test_an_external_id_is_2_to_1224_of_its_characters(raw: str) -> None:
    assert EXTERNAL_ID.parse(raw) == raw


@pytest.mark.parametrize("raw", ["a", "x" * 1225, "has space", "semi;colon"])
def test_other_external_ids_are_refused(raw: str) -> None:
    assert refused(EXTERNAL_ID, raw).endswith("allowed is 2-1224 characters of A-Z a-z 0-9 _ + = , . @ : / -")


def test_a_secret_options_bad_value_is_never_echoed() -> None:
    """An external id is a secret: its option's error shows <secret>, whatever is wrong with it."""
    message = refused(EXTERNAL_ID, "my external id", secret=True)
    assert "my external id" not in message
    assert message == (
        "option kinesis.testOnly=<secret> is invalid: allowed is 2-1224 characters of A-Z a-z 0-9 _ + = , . @ : / -"
    )


@pytest.mark.parametrize("raw", ["eu-west-1", "us-east-1", "ap-southeast-2", "us-gov-west-1", "cn-north-1"])
def test_a_region_name_is_taken(raw: str) -> None:
    assert REGION_NAME.parse(raw) == raw


@pytest.mark.parametrize("raw", ["EU-WEST-1", "euwest1", "eu-west", "us-east-1a", "global", "us_east_1"])
def test_other_region_names_are_refused(raw: str) -> None:
    assert refused(REGION_NAME, raw).endswith("allowed is an AWS region name such as eu-west-1")
