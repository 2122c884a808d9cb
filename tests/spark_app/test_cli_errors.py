"""The jobs' and the demo's command lines meet a user's mistakes: exit code 2 and exactly one line on stderr that
names the flag and what is allowed; no usage block, no traceback. Parsing needs no Spark session: the cases run
in-process, and a few through the real entry points (``python -m spark_app.<module>``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pyspark_aws_kinesis.aws.regions import unknown_region_line
from spark_app import common, country_counts, fan_out, kinesis_to_kinesis, word_count
from spark_app.demo import parse_args

ROOT = Path(__file__).resolve().parents[2]
REQUIRED = ["--source-stream", "src", "--sink-stream", "snk", "--region", "us-east-1", "--checkpoint-location", "/c"]
JOBS = [country_counts, fan_out, kinesis_to_kinesis, word_count]


def one_line(err: str) -> str:
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    assert "usage:" not in err and "Traceback" not in err
    return err.rstrip("\n").removeprefix("error: ")


def job_mistake(capsys, module, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        common.parse_job_args(module.parser(), argv, needs_sink=True)
    assert exit_info.value.code == 2
    return one_line(capsys.readouterr().err)


def demo_mistake(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    assert exit_info.value.code == 2
    return one_line(capsys.readouterr().err)


@pytest.mark.parametrize("module", JOBS, ids=lambda m: m.JOB)
@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--trigger-seconds", "-1"], "--trigger-seconds: got '-1'; allowed: a number of seconds >= 0"),
        (["--trigger-seconds", "inf"], "--trigger-seconds: got 'inf'; allowed: a number of seconds >= 0"),
        (["--endpoint-url", "localhost:4567"], "--endpoint-url: got 'localhost:4567'; allowed: an http(s) URL"),
        (["--source-option", "region=x"], "--source-option: got 'region=x'; allowed: KEY=VALUE with a KEY that"),
        (["--starting-position", "AT_TIMESTAMP"], "--starting-position: invalid choice: 'AT_TIMESTAMP' (choose"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_every_job_names_the_flag_in_one_line(capsys, module, extra, expected):
    line = job_mistake(capsys, module, [*REQUIRED, *extra])
    assert line.startswith(expected), line
    assert line.endswith(f"(python -m spark_app.{module.JOB} --help lists the flags)"), line


@pytest.mark.parametrize("module", JOBS, ids=lambda m: m.JOB)
def test_missing_flags_are_named_in_one_line(capsys, module):
    line = job_mistake(capsys, module, [])
    assert line.startswith("the following arguments are required: --source-stream, --region, --checkpoint-location")


@pytest.mark.parametrize("value", ["0", "1.5", "1e3", "-60"])
def test_country_counts_windows_are_whole_seconds(capsys, value):
    line = job_mistake(capsys, country_counts, [*REQUIRED, "--window-seconds", value])
    assert line.startswith(f"--window-seconds: got '{value}'; allowed: a whole number of seconds > 0"), line


def test_an_explicit_flag_wins_over_short():
    """--short sets what was not given (CI mode); a flag given explicitly keeps its value (docs: --help)."""
    assert (parse_args(["--short"]).seconds, parse_args(["--short"]).rate) == (12.0, 25.0)
    args = parse_args(["--short", "--rate", "40", "--seconds", "30", "--window-seconds", "7"])
    assert (args.seconds, args.rate, args.window_seconds) == (30.0, 40.0, 7)
    assert parse_args(["--short", "--rate", "40"]).seconds == 12.0
    plain = parse_args([])
    assert (plain.seconds, plain.rate, plain.window_seconds) == (60.0, 50.0, 10)


def test_the_demo_help_says_an_explicit_flag_wins_over_short(capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_args(["--help"])
    assert exit_info.value.code == 0
    assert "an explicit --seconds, --rate or --window-seconds wins" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--seconds", "inf"], "--seconds: got 'inf'; allowed: a number > 0"),
        (["--rate", "0"], "--rate: got '0'; allowed: a number > 0"),
        (["--window-seconds", "0"], "--window-seconds: got '0'; allowed: a whole number > 0"),
        (["--shards", "1.5"], "--shards: got '1.5'; allowed: a whole number > 0"),
        (["--malformed", "x"], "--malformed: got 'x'; allowed: a whole number from 0 to 4"),
        (["--timeout-seconds", "10"], "--timeout-seconds: got 10; allowed: 60 or more"),
        (["--endpoint-url", "kinesis"], "--endpoint-url: got 'kinesis'; allowed: an http(s) URL"),
        (["--kinesis-server", "dynamo"], "--kinesis-server: invalid choice: 'dynamo'"),
        (["--aws", "--region", "us-eest-1"], unknown_region_line("us-eest-1", newer="give --endpoint-url")),
    ],
)
def test_the_demo_names_the_flag_in_one_line(capsys, argv, expected):
    line = demo_mistake(capsys, argv)
    assert line.startswith(expected), line
    assert line.endswith("(python -m spark_app.demo --help lists the flags)"), line


def test_a_local_demo_takes_any_region():
    assert parse_args(["--region", "xx-local-1"]).region == "xx-local-1"


def run(module: str, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", module, *argv], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )


@pytest.mark.parametrize(
    ("module", "argv", "expected"),
    [
        ("spark_app.demo", ["--malformed", "9"], "error: --malformed: got '9'; allowed: a whole number from 0 to 4"),
        ("spark_app.word_count", [], "error: the following arguments are required: --source-stream"),
        # run_job's own check, after parsing, before any Spark session
        ("spark_app.country_counts", [*REQUIRED, "--stop-marker", "s3://bucket"], "error: --stop-marker: got"),
    ],
)
def test_the_entry_points_print_one_line_and_no_traceback(module, argv, expected):
    done = run(module, *argv)
    assert done.returncode == 2 and done.stdout == "", (done.returncode, done.stdout, done.stderr)
    assert one_line(done.stderr).startswith(expected.removeprefix("error: ")), done.stderr
