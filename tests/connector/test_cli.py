"""``pyspark_aws_kinesis.cli``, what every command line of the project shares: one line per mistake, exit code 2,
the same words for a refused number or URL, the name the user ran, and "did you mean"."""

from __future__ import annotations

import math

import pytest

from pyspark_aws_kinesis.cli import OneLineParser, did_you_mean, endpoint_url, number, program, usage_line


def test_argparse_messages_start_with_the_flag_and_end_with_where_the_flags_are_listed():
    assert usage_line("argument --rate: must be > 0", "prog") == "--rate: must be > 0 (prog --help lists the flags)"
    assert usage_line("argument -r/--rate: x", "prog").startswith("--rate: x")
    assert usage_line("argument ACTION: invalid choice: 'lst'", "p").startswith("ACTION: invalid choice: 'lst'")
    assert usage_line("line one\n  line two", "p") == "line one line two (p --help lists the flags)"


def test_a_mistake_is_one_line_and_exit_code_2_without_the_usage_block(capsys):
    parser = OneLineParser(prog="python -m tool")
    parser.add_argument("--count", type=number(0, whole=True), required=True)
    for argv in ([], ["--count", "1e3"], ["--count", "5", "--bogus"], ["--count"]):
        with pytest.raises(SystemExit) as exit_info:
            parser.parse_args(argv)
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and err.startswith("error: "), err
        assert "usage:" not in err and "Traceback" not in err
        assert "--count" in err or "--bogus" in err
        assert err.rstrip().endswith("(python -m tool --help lists the flags)")


def test_sub_commands_are_one_line_parsers_too(capsys):
    parser = OneLineParser(prog="tool")
    sub = parser.add_subparsers(dest="command").add_parser("run")
    sub.add_argument("--seconds", type=number(0, unit="seconds"))
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "--seconds", "-3"])
    assert capsys.readouterr().err == (
        "error: --seconds: got '-3'; allowed: a number of seconds > 0 (tool run --help lists the flags)\n"
    )


@pytest.mark.parametrize(
    ("kind", "text", "value"),
    [
        (number(0), "2.5", 2.5),
        (number(0), "1e3", 1000.0),
        (number(0, inclusive=True), "0", 0.0),
        (number(0, whole=True), "1000", 1000),
        (number(0, whole=True), "1_000", 1000),
        (number(0, inclusive=True, maximum=4, whole=True), "4", 4),
    ],
)
def test_numbers_that_are_accepted(kind, text, value):
    parsed = kind(text)
    assert parsed == value and type(parsed) is type(value)


@pytest.mark.parametrize(
    ("kind", "text", "allowed"),
    [
        (number(0, unit="seconds"), "-3", "a number of seconds > 0"),
        (number(0, unit="seconds"), "0", "a number of seconds > 0"),
        (number(0), "inf", "a number > 0"),
        (number(0), "-inf", "a number > 0"),
        (number(0), "nan", "a number > 0"),
        (number(0), "ten", "a number > 0"),
        (number(0, inclusive=True), "-0.5", "a number >= 0"),
        (number(0, whole=True, unit="records"), "1e3", "a whole number of records > 0"),
        (number(0, whole=True), "3.0", "a whole number > 0"),
        (number(0, whole=True), "", "a whole number > 0"),
        (number(0, maximum=10), "11", "a number > 0 and <= 10"),
        (number(0, inclusive=True, maximum=4, whole=True), "9", "a whole number from 0 to 4"),
    ],
)
def test_numbers_that_are_refused_say_what_is_allowed(kind, text, allowed):
    with pytest.raises(Exception, match="allowed") as error:
        kind(text)
    assert str(error.value) == f"got {text!r}; allowed: {allowed}"


def test_a_huge_finite_number_is_kept_finite_by_a_maximum():
    assert math.isfinite(number(0, maximum=1e9)("1e9"))
    with pytest.raises(Exception, match="<= 1000000000"):
        number(0, maximum=1e9)("1e300")


@pytest.mark.parametrize("url", ["https://kinesis.eu-west-1.amazonaws.com", "http://127.0.0.1:4567", "http://h/p"])
def test_endpoint_urls_that_are_accepted(url):
    assert endpoint_url(url) == url


@pytest.mark.parametrize("url", ["foo", "kinesis.eu-west-1.amazonaws.com", "ftp://host", "http://", "http://h:x"])
def test_endpoint_urls_that_are_refused_show_what_a_url_looks_like(url):
    with pytest.raises(Exception) as error:
        endpoint_url(url)
    assert str(error.value) == (
        f"got {url!r}; allowed: an http(s) URL such as https://kinesis.eu-west-1.amazonaws.com or http://127.0.0.1:4567"
    )


def test_an_endpoint_url_with_user_info_is_refused_without_echoing_it():
    with pytest.raises(Exception) as error:
        endpoint_url("https://user:hunter2@kinesis.eu-west-1.amazonaws.com")
    assert "hunter2" not in str(error.value) and "user:password@" in str(error.value)


def test_the_program_is_the_console_script_when_that_ran(monkeypatch):
    monkeypatch.setattr("sys.argv", ["/venv/bin/kinesis-generator", "--help"])
    assert program("kinesis_generator", "kinesis-generator") == "kinesis-generator"
    monkeypatch.setattr("sys.argv", ["/checkout/kinesis_generator/__main__.py"])
    assert program("kinesis_generator", "kinesis-generator") == "python -m kinesis_generator"
    monkeypatch.setattr("sys.argv", [""])
    assert program("kinesis_generator", "kinesis-generator") == "python -m kinesis_generator"


def test_did_you_mean_names_the_closest_known_words():
    assert did_you_mean("sourceShard", ["sourceShards", "sinkShards", "region"]) == "did you mean 'sourceShards'?"
    assert did_you_mean("nothing-like-it", ["sourceShards"]) == ""
