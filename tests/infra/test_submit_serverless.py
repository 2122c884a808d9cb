"""`python -m infra.submit_step --serverless` against moto's EMR Serverless and S3 APIs.

moto 5.2.5 ends every job run in SUCCESS at once and keeps no `mode`; CancelJobRun moves it to CANCELLED. So the
start (its request, recorded on the real client), the wait to a final state, the stop and every user mistake
run against moto; the states moto never shows (RUNNING, FAILED) are covered by `run_outcome` on
GetJobRun-shaped answers.
"""

from __future__ import annotations

import uuid

import pytest

from infra import submit_serverless, submit_step
from tests.infra.conftest import ACCOUNT, REGION

ROLE = f"arn:aws:iam::{ACCOUNT}:role/serverless-job"
VENV = "s3://assets/0123abcd.tgz"


@pytest.fixture
def application(moto) -> str:
    client = moto.client("emr-serverless", region=REGION)
    name = f"pipeline-{uuid.uuid4().hex[:6]}"
    # moto 5.2.5 accepts only emr-X.Y.0 labels; the submitter never looks at the label.
    return client.create_application(name=name, releaseLabel="emr-7.9.0", type="SPARK")["applicationId"]


@pytest.fixture
def bucket(moto) -> str:
    name = f"pipeline-{uuid.uuid4().hex[:8]}"
    moto.client("s3", region=REGION).create_bucket(
        Bucket=name, CreateBucketConfiguration={"LocationConstraint": REGION}
    )
    return name


@pytest.fixture
def keys(monkeypatch, tmp_path) -> None:
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        monkeypatch.setenv(name, value)


def _argv(moto, application: str, bucket: str, *extra: str) -> list[str]:
    return [
        "--serverless", "--application-id", application, "--job-role-arn", ROLE, "--venv-uri", VENV,
        "--bucket", bucket, "--source-stream", "src", "--sink-stream", "snk", "--region", REGION,
        "--endpoint-url", moto.endpoint_url, "--poll-seconds", "0.1", *extra,
    ]  # fmt: skip


def test_start_job_run_asks_for_streaming_mode_with_retries(moto, application):
    client = moto.client("emr-serverless", region=REGION)
    sent: list[dict] = []
    client.meta.events.register(
        "provide-client-params.emr-serverless.StartJobRun", lambda params, **_: sent.append(params)
    )
    driver = {"sparkSubmit": {"entryPoint": "s3://b/j.py"}}
    job_run_id = submit_serverless.start_job_run(
        client, application_id=application, role_arn=ROLE, name="country_counts", job_driver=driver,
        max_failed_per_hour=5,
    )  # fmt: skip
    (params,) = sent
    assert params["mode"] == "STREAMING" and params["retryPolicy"] == {"maxFailedAttemptsPerHour": 5}
    assert "executionTimeoutMinutes" not in params  # a streaming run has no timeout
    run = client.get_job_run(applicationId=application, jobRunId=job_run_id)["jobRun"]
    assert run["executionRole"] == ROLE and run["jobDriver"] == driver


def test_cli_uploads_starts_and_waits_for_the_end(moto, application, bucket, keys, capsys):
    assert submit_step.main(_argv(moto, application, bucket, "--", "--trigger-seconds", "30")) == 0
    out, err = capsys.readouterr()
    assert "started streaming job run" in out and out.rstrip().endswith("SUCCESS") and err == ""
    client = moto.client("emr-serverless", region=REGION)
    (run,) = client.list_job_runs(applicationId=application)["jobRuns"]
    submit = client.get_job_run(applicationId=application, jobRunId=run["id"])["jobRun"]["jobDriver"]["sparkSubmit"]
    args = submit["entryPointArguments"]
    assert args[args.index("--checkpoint-location") + 1] == f"s3://{bucket}/checkpoints/country_counts"
    assert args[-2:] == ["--trigger-seconds", "30"]
    assert f"spark.archives={VENV}#environment" in submit["sparkSubmitParameters"]
    assert submit["entryPoint"].startswith(f"s3://{bucket}/code/") and submit["entryPoint"].endswith(".py")
    assert f"job run {run['id']} SUCCESS" in out


def test_cli_stops_a_job_run(moto, application, keys, capsys):
    client = moto.client("emr-serverless", region=REGION)
    job_run_id = client.start_job_run(applicationId=application, executionRoleArn=ROLE, clientToken="t")["jobRunId"]
    argv = ["--serverless", "--application-id", application, "--region", REGION, "--endpoint-url",
            moto.endpoint_url, "--stop", job_run_id, "--poll-seconds", "0.1"]  # fmt: skip
    assert submit_step.main(argv) == 0
    assert capsys.readouterr().out.rstrip().endswith(f"job run {job_run_id} CANCELLED")
    assert client.get_job_run(applicationId=application, jobRunId=job_run_id)["jobRun"]["state"] == "CANCELLED"


def _mistake(argv: list[str], capsys, code: int) -> str:
    assert submit_step.main(argv) == code
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1, err
    return err.strip()


def test_unknown_application_is_found_before_the_upload(moto, bucket, keys, capsys):
    line = _mistake(_argv(moto, "00fbogus0123", bucket), capsys, 2)
    assert line.startswith(f"error: --application-id '00fbogus0123': no such EMR Serverless application in {REGION}")
    assert "Contents" not in moto.client("s3", region=REGION).list_objects_v2(Bucket=bucket)


def test_unknown_job_run_to_stop_is_named(moto, application, keys, capsys):
    argv = ["--serverless", "--application-id", application, "--region", REGION, "--endpoint-url",
            moto.endpoint_url, "--stop", "00fnosuchrun"]  # fmt: skip
    line = _mistake(argv, capsys, 2)
    assert line.startswith(f"error: --stop '00fnosuchrun': no such job run on application {application}")


def test_misspelled_region_and_missing_flags_are_named(moto, application, bucket, keys, capsys):
    argv = _argv(moto, application, bucket)
    argv[argv.index(REGION)] = "eu-wset-1"
    assert "(did you mean 'eu-west-1'" in _mistake(argv, capsys, 2)
    with pytest.raises(SystemExit) as exit_info:
        submit_step.main(["--serverless", "--application-id", application, "--region", REGION])
    assert exit_info.value.code == 2
    assert "to start a job run, also give --job-role-arn, --venv-uri, --bucket" in capsys.readouterr().err


def _run(state: str, **more) -> dict:
    return {"jobRunId": "00f1", "state": state, **more}


def test_run_outcome_for_every_state():
    for state in ("SUBMITTED", "PENDING", "SCHEDULED", "RUNNING", "QUEUED", "CANCELLING"):
        assert submit_serverless.run_outcome(_run(state), stopping=False) is None
    assert submit_serverless.run_outcome(_run("SUCCESS"), stopping=False) == "SUCCESS"
    assert submit_serverless.run_outcome(_run("CANCELLED"), stopping=True) == "CANCELLED"
    with pytest.raises(submit_serverless.JobRunFailedError, match="job run 00f1 CANCELLED: by someone"):
        submit_serverless.run_outcome(_run("CANCELLED", stateDetails="by someone"), stopping=False)
    with pytest.raises(submit_serverless.JobRunFailedError, match="job run 00f1 FAILED: Driver exited"):
        submit_serverless.run_outcome(_run("FAILED", stateDetails="Driver exited"), stopping=True)
