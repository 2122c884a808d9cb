"""``python -m infra.submit_step`` (and ``--serverless``) meets a user's mistakes: exit code 2 and exactly one line
on stderr that names the flag and what is allowed; no usage block, no traceback. Each is found before any AWS
call (no server needed), in-process; one runs through the real entry point. A misspelled region reads the same in
every command line of the project."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra import submit_step
from infra.job_code import job_names

ROOT = Path(__file__).resolve().parents[2]
BASE = ["--cluster-id", "j-1", "--bucket", "b", "--source-stream", "s", "--sink-stream", "k", "--region", "eu-west-1"]
SERVERLESS = ["--serverless", "--application-id", "00f1", "--region", "eu-west-1"]
JOBS = "the jobs are: country_counts, fan_out, kinesis_to_kinesis, word_count"


pytestmark = pytest.mark.usefixtures("no_aws_config")


def mistake(capsys, argv: list[str]) -> str:
    """The one stderr line of a run that must exit 2 (argparse's exit or main's return), nothing on stdout."""
    try:
        code = submit_step.main(argv)
    except SystemExit as exit_info:
        code = exit_info.code
    out, err = capsys.readouterr()
    assert (code, out) == (2, ""), (code, out, err)
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    assert "usage:" not in err and "Traceback" not in err
    return err.rstrip("\n").removeprefix("error: ")


def test_the_jobs_are_the_modules_that_keep_the_job_contract():
    assert job_names() == ["country_counts", "fan_out", "kinesis_to_kinesis", "word_count"]


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        ("nosuchjob", f"--job 'nosuchjob': no spark_app/nosuchjob.py; {JOBS}"),
        ("common", f"--job 'common': spark_app/common.py is not a job (no parser(), start() and main()); {JOBS}"),
        ("demo", f"--job 'demo': spark_app/demo.py is not a job (no parser(), start() and main()); {JOBS}"),
        ("Count-Job", "--job: job 'Count-Job': must be a module name under spark_app/ such as country_counts; "),
    ],
)
@pytest.mark.parametrize("serverless", [False, True])
def test_a_job_that_is_not_one_lists_only_the_real_jobs(capsys, job, expected, serverless):
    argv = [*SERVERLESS, "--job-role-arn", "r", "--venv-uri", "v", *BASE[2:]] if serverless else BASE
    line = mistake(capsys, [*argv, "--job", job])
    assert line.startswith(expected), line
    assert "verdict" not in line and "events" not in line


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--timeout-seconds", "-3"], "--timeout-seconds: got '-3'; allowed: a number of seconds > 0"),
        (["--poll-seconds", "inf"], "--poll-seconds: got 'inf'; allowed: a number of seconds > 0"),
        (["--endpoint-url", "127.0.0.1:5000"], "--endpoint-url: got '127.0.0.1:5000'; allowed: an http(s) URL"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bad_flags_are_one_line(capsys, extra, expected):
    line = mistake(capsys, [*BASE, *extra])
    assert line.startswith(expected) and line.endswith("(python -m infra.submit_step --help lists the flags)"), line


def test_missing_flags_are_one_line(capsys):
    line = mistake(capsys, [])
    assert line.startswith("the following arguments are required: --cluster-id, --bucket"), line


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--stop", "00f2", "--run-seconds", "0"], "--run-seconds: got '0'; allowed: a number of seconds > 0"),
        (["--stop", "00f2", "--max-failed-attempts-per-hour", "1.5"], "--max-failed-attempts-per-hour: got '1.5'"),
        ([], "to start a job run, also give --job-role-arn, --venv-uri, --bucket, --source-stream, --sink-stream"),
    ],
)
def test_serverless_flags_are_one_line(capsys, extra, expected):
    line = mistake(capsys, [*SERVERLESS, *extra])
    assert line.startswith(expected), line
    assert line.endswith("(python -m infra.submit_step --serverless --help lists the flags)"), line


def test_a_misspelled_region_reads_the_same_in_every_command_line(capsys, monkeypatch, tmp_path):
    """The submitters, the consumers' command and the load generator: the same words, each naming its own way
    to reach a region newer than botocore."""
    from kinesis_generator.cli import main as generator
    from pyspark_aws_kinesis.__main__ import main as consumers

    argv = [*BASE[:-1], "eu-wset-1"]
    step = mistake(capsys, argv)
    assert step == (
        "--region 'eu-wset-1': not a region where AWS has emr (did you mean 'eu-west-1' or 'us-west-1'?); "
        "for a region newer than this botocore, add --allow-unknown-region"
    )
    serverless = mistake(capsys, [*SERVERLESS[:-1], "eu-wset-1", "--stop", "00f2"])
    assert serverless == step.replace("AWS has emr", "AWS has emr-serverless")

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    assert consumers(["consumers", "list", "--stream", "s", "--region", "eu-wset-1"]) == 2
    from_consumers = capsys.readouterr().err.rstrip("\n").removeprefix("error: ")
    assert generator(["--stream", "s", "--region", "eu-wset-1", "--count", "1"]) == 2
    from_generator = capsys.readouterr().err.rstrip("\n").removeprefix("error: ")

    same = "--region 'eu-wset-1': not a region where AWS has "
    newer = "; for a region newer than this botocore, "
    for line in (step, serverless, from_consumers, from_generator):
        assert line.startswith(same) and newer in line and "\n" not in line, line
    assert from_consumers == step.replace("AWS has emr", "AWS has kinesis")
    assert from_generator.endswith(f"{newer}give --endpoint-url https://kinesis.eu-wset-1.amazonaws.com")


def test_the_entry_point_prints_one_line_and_no_traceback():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "infra.submit_step", *BASE, "--job", "verdict"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"error: --job 'verdict': spark_app/verdict.py is not a job (no parser(), start() and main()); {JOBS}"
    ]
