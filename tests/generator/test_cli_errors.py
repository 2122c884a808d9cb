"""``python -m kinesis_generator`` meets a user's mistakes: one line on stderr that starts with the flag or value at
fault and says what to do, the documented exit code, a JSON error object with ``--json``, and nothing sent.

Each case runs the CLI once with ``--json`` and checks the line (stderr) and the object (stdout) of that run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from localaws.fault_proxy import FaultProxy, Faults
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY, LocalServer, free_port, project_root

# What boto3's default chain could find credentials or a profile in, besides the files the tests point it to.
AWS_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
)


def aws_env(home: Path, keys: bool = True) -> dict[str, str]:
    """The environment of a user whose AWS config lives in ``home`` (no instance role: IMDS is off)."""
    env = {name: value for name, value in os.environ.items() if name not in AWS_ENV}
    env.update(
        AWS_CONFIG_FILE=str(home / "config"),
        AWS_SHARED_CREDENTIALS_FILE=str(home / "credentials"),
        AWS_EC2_METADATA_DISABLED="true",
    )
    if keys:
        env.update(AWS_ACCESS_KEY_ID=DUMMY_ACCESS_KEY, AWS_SECRET_ACCESS_KEY=DUMMY_SECRET_KEY)
    return env


def fails(env: dict[str, str], *args: str) -> tuple[int, str, dict]:
    """Run the CLI with ``--json``; its exit code, its one stderr line, and its JSON error object (whose
    ``summary`` the last test reads)."""
    done = subprocess.run(
        [sys.executable, "-m", "kinesis_generator", *args, "--json"],
        capture_output=True, text=True, env=env, cwd=project_root(), timeout=60,
    )  # fmt: skip
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    found = json.loads(done.stdout)
    error = found["error"]
    error["summary"] = found.get("summary")
    return done.returncode, lines[0].removeprefix("error: "), error


def test_a_template_file_that_is_not_there(tmp_path: Path, kinesalite: LocalServer):
    missing = tmp_path / "nope.json"
    code, line, error = fails(aws_env(tmp_path), "--stream", "s", "--endpoint-url", kinesalite.endpoint_url,
                              "--count", "5", "--template-file", str(missing))  # fmt: skip
    assert code == error["exit_code"] == 2 and error["flag"] == "--template-file"
    assert line.startswith(f"--template-file {missing}: ") and "No such file" in line


def test_no_credentials_anywhere(tmp_path: Path, kinesalite: LocalServer, lite_stream):
    with FaultProxy(kinesalite.endpoint_url) as proxy:
        code, line, error = fails(aws_env(tmp_path, keys=False), "--stream", lite_stream(),
                                  "--endpoint-url", proxy.endpoint_url, "--count", "5")  # fmt: skip
    assert code == error["exit_code"] == 3 and error["flag"] == "--profile"
    assert line.startswith("no AWS credentials found") and "AWS_ACCESS_KEY_ID" in line and "--profile" in line
    assert sum(proxy.calls.values()) == 0  # found before any call


def test_a_profile_that_does_not_exist(tmp_path: Path):
    (tmp_path / "config").write_text("[profile staging]\nregion = eu-west-1\n")
    code, line, error = fails(aws_env(tmp_path), "--stream", "s", "--profile", "dev", "--count", "5")
    assert code == error["exit_code"] == 2 and error["flag"] == "--profile"
    assert line.startswith("--profile dev: no such profile") and "staging" in line and "aws configure" in line


def test_a_stream_that_does_not_exist_is_told_in_the_generators_flags(tmp_path: Path, kinesalite: LocalServer):
    code, line, error = fails(aws_env(tmp_path), "--stream", "no-such-stream",
                              "--endpoint-url", kinesalite.endpoint_url, "--count", "5")  # fmt: skip
    assert code == error["exit_code"] == 3 and error["flag"] == "--stream"
    assert line.startswith("--stream no-such-stream: no such stream at ")
    assert "--region" in line and "--endpoint-url" in line
    assert "kinesis.region" not in line and "retry of the task" not in line


def test_an_endpoint_that_does_not_answer(tmp_path: Path):
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    code, line, error = fails(aws_env(tmp_path), "--stream", "s", "--endpoint-url", endpoint, "--count", "5")
    assert code == error["exit_code"] == 3 and error["flag"] == "--endpoint-url"
    assert line.startswith(f"--endpoint-url {endpoint}: no answer") and "server running" in line


def test_a_misspelled_region(tmp_path: Path):
    code, line, error = fails(aws_env(tmp_path), "--stream", "s", "--region", "us-eest-1", "--count", "5")
    assert code == error["exit_code"] == 2 and error["flag"] == "--region"
    assert line.startswith("--region 'us-eest-1': not a region where AWS has kinesis") and "'us-east-1'" in line


def test_a_bad_value_on_the_command_line(tmp_path: Path):
    code, line, error = fails(aws_env(tmp_path), "--stream", "s", "--rate", "-5", "--count", "5")
    assert code == error["exit_code"] == 2 and error["flag"] == "--rate"
    assert line.startswith("--rate: got '-5'; allowed: a number of records per second > 0")


@pytest.mark.parametrize("refusal", ["AccessDeniedException", "ResourceNotFoundException"])
def test_a_refusal_in_the_middle_of_a_run_ends_it_with_one_line_and_what_was_sent(
    tmp_path: Path, kinesalite: LocalServer, lite_stream, refusal: str
):
    """ListShards passes (the checks find the stream), then PutRecords is refused for good."""
    faults = Faults(errors=((refusal, 1.0),), actions=frozenset({"PutRecords"}))
    with FaultProxy(kinesalite.endpoint_url, faults) as proxy:
        code, line, error = fails(aws_env(tmp_path), "--stream", lite_stream(), "--endpoint-url", proxy.endpoint_url,
                                  "--count", "20", "--rate", "1000", "--quiet")  # fmt: skip
    assert proxy.stats[refusal] >= 1
    assert code == error["exit_code"] == 3
    assert line.startswith("--stream ") and line.endswith("(0 records were stored before)")
    assert ("access denied" in line) if refusal == "AccessDeniedException" else ("no such stream" in line)
    assert "kinesis.region" not in line
    assert error["summary"]["records"] == 0 and error["summary"]["due"] == 20


# --- the flags alone: found before anything is imported that the run needs, in-process -----------------------


def usage_mistake(capsys, *args: str, json_error: bool = False) -> str:
    """Run the CLI in-process; it must exit 2 with one stderr line and no usage block; returns that line."""
    from kinesis_generator.cli import main

    assert main([*args, *(["--json"] if json_error else [])]) == 2
    out, err = capsys.readouterr()
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    assert "usage:" not in err and "Traceback" not in err
    if json_error:
        assert json.loads(out)["error"]["exit_code"] == 2
    else:
        assert out == ""
    return err.rstrip("\n").removeprefix("error: ")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--count", "1e3"], "--count: got '1e3'; allowed: a whole number of records > 0"),
        (["--count", "3.0"], "--count: got '3.0'; allowed: a whole number of records > 0"),
        (["--count", "0"], "--count: got '0'; allowed: a whole number of records > 0"),
        (["--duration", "inf"], "--duration: got 'inf'; allowed: a number of seconds > 0 and <= 31536000"),
        (["--duration", "1e300"], "--duration: got '1e300'; allowed: a number of seconds > 0 and <= 31536000"),
        (["--duration", "nan"], "--duration: got 'nan'; allowed: a number of seconds > 0"),
        (["--count", "5", "--rate", "inf"], "--rate: got 'inf'; allowed: a number of records per second > 0"),
        (["--count", "5", "--periodic", "inf", "1"], "--periodic: got 'inf'; allowed: a number of records per second"),
        (["--count", "5", "--periodic", "10", "nan"], "--periodic: got 'nan'; allowed: a number of records per second"),
        (["--count", "5", "--workers", "0"], "--workers: got '0'; allowed: a whole number > 0"),
        (["--count", "5", "--max-retries", "-1"], "--max-retries: got '-1'; allowed: a whole number >= 0"),
        (["--count", "5", "--seed", "x"], "--seed: got 'x'; allowed: a whole number >= 0"),
        (["--count", "5", "--endpoint-url", "localhost"], "--endpoint-url: got 'localhost'; allowed: an http(s) URL"),
    ],
)
def test_a_value_that_is_not_allowed_is_one_line_that_says_what_is(capsys, args, expected):
    line = usage_mistake(capsys, "--stream", "s", *args)
    assert line.startswith(expected), line
    assert line.endswith("(python -m kinesis_generator --help lists the flags)"), line


def test_the_json_error_names_the_flag(capsys):
    from kinesis_generator.cli import main

    assert main(["--stream", "s", "--count", "1e3", "--json"]) == 2
    out, err = capsys.readouterr()
    assert json.loads(out)["error"]["flag"] == "--count" and len(err.splitlines()) == 1


def test_the_console_script_is_named_as_the_user_ran_it(capsys, monkeypatch):
    from kinesis_generator.cli import build_parser

    monkeypatch.setattr("sys.argv", ["/venv/bin/kinesis-generator"])
    assert usage_mistake(capsys, "--count", "5").endswith("(kinesis-generator --help lists the flags)")
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["--help"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("usage: kinesis-generator ")


def test_the_help_shows_the_senders_default_retries():
    from kinesis_generator import cli, sender

    assert cli.build_parser().parse_args(["--stream", "s"]).max_retries == sender.DEFAULT_RETRY.max_retries


# --- without the [generator] extra (faker, rich) ----------------------------------------------------------------

WITHOUT = "import runpy, sys; sys.modules[{module!r}] = None; sys.argv[1:] = {args!r}; "


def without(module: str, *args: str, script: bool = False) -> subprocess.CompletedProcess:
    """The generator run where ``module`` cannot be imported: ``python -m kinesis_generator`` (or the console
    script's ``kinesis_generator.cli:main``)."""
    run = (
        "sys.argv[0] = 'kinesis-generator'; from kinesis_generator.cli import main; sys.exit(main())"
        if script
        else "runpy.run_module('kinesis_generator', run_name='__main__', alter_sys=True)"
    )
    return subprocess.run(
        [sys.executable, "-c", WITHOUT.format(module=module, args=list(args)) + run],
        capture_output=True, text=True, cwd=project_root(), timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize("module", ["faker", "rich"])
@pytest.mark.parametrize("script", [False, True])
def test_a_run_without_the_extra_says_which_to_install(module: str, script: bool):
    done = without(module, "--stream", "s", "--count", "5", script=script)
    assert done.returncode == 2 and done.stdout == "", (done.returncode, done.stdout, done.stderr)
    assert done.stderr.splitlines() == [
        f"error: {module} is not installed: the load generator needs the package's [generator] extra: "
        "pip install '.[generator]' in this checkout, or pip install 'pyspark-aws-kinesis[generator]'"
    ]


def test_help_and_flag_mistakes_need_no_extra():
    helped = without("faker", "--help")
    assert helped.returncode == 0 and helped.stdout.startswith("usage: python -m kinesis_generator "), helped.stderr
    assert "--periodic MEAN STDDEV" in helped.stdout and helped.stderr == ""
    wrong = without("faker", "--stream", "s", "--count", "1e3", "--json")
    assert wrong.returncode == 2 and json.loads(wrong.stdout)["error"]["flag"] == "--count"
    assert wrong.stderr.startswith("error: --count: got '1e3'") and "Traceback" not in wrong.stderr
