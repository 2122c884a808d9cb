"""``python -m pyspark_aws_kinesis`` (the consumers command) meets a user's mistakes: exit code 2 and exactly one
line on stderr that names the flag (or the command) and what is allowed; no usage block, no traceback. Each is
found before any AWS call, so no server is needed: the cases run in-process, one through the real entry point."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pyspark_aws_kinesis.__main__ import main
from pyspark_aws_kinesis.aws.regions import unknown_region_line

ROOT = Path(__file__).resolve().parents[2]
STREAM = ["--stream", "s"]


pytestmark = pytest.mark.usefixtures("no_aws_config")


def mistake(capsys, *argv: str) -> str:
    """The one stderr line of a run that must exit 2 (argparse's exit or main's return), nothing on stdout."""
    try:
        code = main(list(argv))
    except SystemExit as exit_info:
        code = exit_info.code
    out, err = capsys.readouterr()
    assert (code, out) == (2, ""), (code, out, err)
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    assert "usage:" not in err and "Traceback" not in err
    return err.rstrip("\n").removeprefix("error: ")


def test_no_command_says_which_commands_exist(capsys):
    line = mistake(capsys)
    assert line.startswith("no command given; the commands are: consumers (list, register or deregister"), line
    assert "group" not in line


def test_an_unknown_command_lists_the_commands(capsys):
    assert mistake(capsys, "consumer").startswith("COMMAND: invalid choice: 'consumer' (choose from 'consumers')")


def test_an_unknown_action_lists_the_actions(capsys):
    line = mistake(capsys, "consumers", "lst", *STREAM)
    assert line.startswith("ACTION: invalid choice: 'lst' (choose from 'list', 'register', 'deregister')"), line


@pytest.mark.parametrize("value", ["-3", "0", "inf", "nan", "soon"])
def test_a_timeout_that_is_not_a_positive_number_is_refused(capsys, value):
    line = mistake(capsys, "consumers", "list", *STREAM, "--timeout", value)
    assert line.startswith(f"--timeout: got '{value}'; allowed: a number of seconds > 0"), line


@pytest.mark.parametrize("url", ["not a url", "kinesis.eu-west-1.amazonaws.com", "localhost:4567"])
def test_a_bad_endpoint_url_is_named_with_what_a_url_looks_like(capsys, url):
    line = mistake(capsys, "consumers", "list", *STREAM, "--endpoint-url", url)
    assert line.startswith(f"--endpoint-url: got {url!r}; allowed: an http(s) URL such as https://"), line
    assert "region" not in line.split("(")[0]


def test_an_endpoint_url_without_a_region_in_it_asks_for_region(capsys):
    line = mistake(capsys, "consumers", "list", *STREAM, "--endpoint-url", "https://kinesis.example.com")
    assert line == (
        "--region: missing; none can be inferred from --endpoint-url https://kinesis.example.com; "
        "pass --region (e.g. us-east-1) or set AWS_DEFAULT_REGION"
    )


def test_register_without_a_name_names_the_flag(capsys):
    line = mistake(capsys, "consumers", "register", *STREAM)
    assert line.startswith("--name: missing; consumers register needs the consumer's name"), line


@pytest.mark.parametrize("argv", [["consumers", "list"], ["consumers", "list", *STREAM, "--bogus"]])
def test_a_missing_or_unknown_flag_points_at_the_commands_help(capsys, argv):
    line = mistake(capsys, *argv)
    assert ("--stream" in line or "--bogus" in line) and line.endswith(
        "(python -m pyspark_aws_kinesis consumers --help lists the flags)"
    ), line


def test_a_misspelled_region_gets_the_wording_of_every_command_line(capsys):
    line = mistake(capsys, "consumers", "list", *STREAM, "--region", "us-eest-1")
    assert line == unknown_region_line("us-eest-1")
    assert line.startswith("--region 'us-eest-1': not a region where AWS has kinesis (did you mean ")
    assert "'us-east-1'" in line and line.endswith("add --allow-unknown-region")


def test_a_misspelled_region_from_the_environment_is_named_as_such(capsys, monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-wset-1")
    line = mistake(capsys, "consumers", "list", *STREAM)
    assert line.startswith("AWS_DEFAULT_REGION (or the AWS config's region) 'eu-wset-1': not a region"), line


def test_the_entry_point_prints_one_line_and_no_traceback():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "pyspark_aws_kinesis", "consumers", "list", "--stream", "s", "--timeout", "-3"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "error: --timeout: got '-3'; allowed: a number of seconds > 0 "
        "(python -m pyspark_aws_kinesis consumers --help lists the flags)"
    ]
