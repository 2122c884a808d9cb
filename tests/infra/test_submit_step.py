"""infra.submit_step against moto's EMR and S3 APIs (moto keeps a step RUNNING forever and never completes it).

Covered on moto: the upload, the step's command, progress output, the timeout path and the cluster-gone path,
and every user mistake the CLI checks before it uploads anything (one line each, with its exit code).
The COMPLETED and FAILED paths are covered by `step_outcome` on DescribeStep-shaped answers, since moto has
no way to move a step to those states.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

import pytest

from infra import job_code, packaging, submit_step
from tests.infra.conftest import REGION


@pytest.fixture
def cluster(moto) -> str:
    emr = moto.client("emr", region=REGION)
    response = emr.run_job_flow(
        Name=f"test-{uuid.uuid4().hex[:6]}",
        ReleaseLabel="emr-spark-8.0.0",
        Instances={"MasterInstanceType": "m7g.xlarge", "InstanceCount": 1, "KeepJobFlowAliveWhenNoSteps": True},
        JobFlowRole="EMR_EC2_DefaultRole",
        ServiceRole="EMR_DefaultRole",
    )
    return response["JobFlowId"]


@pytest.fixture
def bucket(moto) -> str:
    name = f"pipeline-{uuid.uuid4().hex[:8]}"
    moto.client("s3", region=REGION).create_bucket(
        Bucket=name, CreateBucketConfiguration={"LocationConstraint": REGION}
    )
    return name


def test_upload_puts_zip_and_entry_under_a_content_addressed_prefix(moto, bucket, project_root):
    s3 = moto.client("s3", region=REGION)
    code = job_code.upload_code(s3, bucket, "country_counts", project_root)
    assert code.pyfiles_uri.startswith(f"s3://{bucket}/code/") and code.pyfiles_uri.endswith("/pyfiles.zip")
    assert code.job_uri == code.pyfiles_uri.replace("pyfiles.zip", "country_counts.py")
    entry = s3.get_object(Bucket=bucket, Key=code.job_uri.split("/", 3)[3])["Body"].read()
    assert entry == (project_root / "spark_app" / "country_counts.py").read_bytes()
    # Same code, same place: a re-submit reuses the objects instead of piling up copies.
    assert job_code.upload_code(s3, bucket, "country_counts", project_root) == code


def test_unknown_job_is_a_clear_error(moto, bucket, project_root):
    with pytest.raises(FileNotFoundError, match=r"job 'no_such_job'.*does not exist"):
        job_code.upload_code(moto.client("s3", region=REGION), bucket, "no_such_job", project_root)


def test_submitted_step_runs_spark_submit_through_command_runner(moto, cluster):
    emr = moto.client("emr", region=REGION)
    command = ["spark-submit", "--py-files", "s3://b/p.zip", "s3://b/j.py", "--region", REGION]
    step_id = submit_step.submit_step(emr, cluster, "country_counts", command)
    step = emr.describe_step(ClusterId=cluster, StepId=step_id)["Step"]
    assert step["Name"] == "country_counts"
    assert step["ActionOnFailure"] == "CONTINUE"
    assert step["Config"]["Jar"] == "command-runner.jar"
    assert step["Config"]["Args"] == command


def test_wait_reports_progress_then_times_out_while_running(moto, cluster):
    emr = moto.client("emr", region=REGION)
    step_id = submit_step.submit_step(emr, cluster, "country_counts", ["spark-submit", "x.py"])
    lines: list[str] = []
    with pytest.raises(submit_step.StepTimeoutError, match=f"step {step_id} still RUNNING after"):
        submit_step.wait_for_step(emr, cluster, step_id, timeout_s=0.3, poll_s=0.1, report=lines.append)
    # One line per change, not per poll: the step stayed RUNNING on a RUNNING cluster.
    assert lines == [lines[0]] and f"step {step_id} RUNNING (cluster {cluster} RUNNING)" in lines[0]


def test_wait_fails_when_the_cluster_terminates_under_the_step(moto, cluster):
    emr = moto.client("emr", region=REGION)
    step_id = submit_step.submit_step(emr, cluster, "country_counts", ["spark-submit", "x.py"])
    emr.terminate_job_flows(JobFlowIds=[cluster])
    with pytest.raises(submit_step.StepFailedError, match=f"cluster {cluster} is TERMINATED"):
        submit_step.wait_for_step(emr, cluster, step_id, timeout_s=30, poll_s=0.1, report=lambda line: None)


def _step(state: str, **status) -> dict:
    return {"Id": "s-1", "Status": {"State": state, **status}}


def test_step_outcome_completed_pending_and_failed():
    assert submit_step.step_outcome(_step("COMPLETED")) == "COMPLETED"
    assert submit_step.step_outcome(_step("PENDING")) is None
    assert submit_step.step_outcome(_step("RUNNING")) is None
    failed = _step("FAILED", FailureDetails={"Reason": "Unknown Error.", "LogFile": "s3://b/logs/s-1/stderr.gz"})
    with pytest.raises(
        submit_step.StepFailedError, match=re.escape("step s-1 FAILED: Unknown Error.; s3://b/logs/s-1/stderr.gz")
    ):
        submit_step.step_outcome(failed)
    cancelled = _step("CANCELLED", StateChangeReason={"Message": "Cancelled by user"})
    with pytest.raises(submit_step.StepFailedError, match="CANCELLED: Cancelled by user"):
        submit_step.step_outcome(cancelled)


def test_cli_uploads_submits_and_exits_3_on_timeout(moto, cluster, bucket, project_root, monkeypatch, capsys):
    monkeypatch.setattr(packaging, "PROJECT_ROOT", project_root)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    argv = [
        "--cluster-id", cluster, "--bucket", bucket, "--source-stream", "src", "--sink-stream", "snk",
        "--region", REGION, "--endpoint-url", moto.endpoint_url, "--timeout-seconds", "0.2", "--poll-seconds", "0.1",
        "--", "--trigger-seconds", "30",
    ]  # fmt: skip
    assert submit_step.main(argv) == submit_step.EXIT_TIMEOUT
    out, err = capsys.readouterr()
    assert "submitted step s-" in out and "RUNNING" in out and "timeout: step" in err
    emr = moto.client("emr", region=REGION)
    (step,) = emr.list_steps(ClusterId=cluster)["Steps"]
    args = step["Config"]["Args"]
    assert args[args.index("--checkpoint-location") + 1] == f"s3://{bucket}/checkpoints/country_counts"
    assert args[-2:] == ["--trigger-seconds", "30"]
    # The interpreter the bootstrap action installed the wheelhouse into.
    assert "spark.pyspark.python=python3.11" in args and "spark.pyspark.driver.python=python3.11" in args


def test_cli_rejects_a_non_positive_timeout(capsys):
    base = ["--cluster-id", "j-1", "--bucket", "b", "--source-stream", "s", "--sink-stream", "k", "--region", REGION]
    with pytest.raises(SystemExit) as exit_info:
        submit_step.main([*base, "--timeout-seconds", "0"])
    assert exit_info.value.code == 2
    assert "--timeout-seconds: got '0'; allowed: a number of seconds > 0" in capsys.readouterr().err


def test_module_runs_without_loading_the_cdk():
    import subprocess
    import sys

    code = "import sys, infra.submit_step; print('aws_cdk' in sys.modules)"
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


# --- user mistakes: one line, a documented exit code, nothing uploaded -----------------------------------------


@pytest.fixture
def aws_env(monkeypatch, tmp_path) -> dict[str, str]:
    """Test keys, and nothing else that could supply credentials or a profile (no config files, no IMDS)."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-credentials"),
        "AWS_CONFIG_FILE": str(tmp_path / "no-config"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_MAX_ATTEMPTS": "1",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


def _argv(moto, cluster: str, bucket: str, *extra: str, region: str = REGION) -> list[str]:
    return [
        "--cluster-id", cluster, "--bucket", bucket, "--source-stream", "src", "--sink-stream", "snk",
        "--region", region, "--endpoint-url", moto.endpoint_url, "--no-wait", *extra,
    ]  # fmt: skip


def _mistake(argv: list[str], capsys, code: int) -> str:
    """Run the CLI, expect exit `code` and exactly one line on stderr; return that line."""
    assert submit_step.main(argv) == code
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1, err
    return err.strip()


def _uploaded(moto, bucket: str) -> list[str]:
    return [o["Key"] for o in moto.client("s3", region=REGION).list_objects_v2(Bucket=bucket).get("Contents", [])]


def test_no_credentials_is_one_line_before_anything_is_sent(moto, cluster, bucket, aws_env, monkeypatch, capsys):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    line = _mistake(_argv(moto, cluster, bucket), capsys, submit_step.EXIT_AWS)
    assert line.startswith("error: no AWS credentials found: set AWS_PROFILE (or --profile)"), line
    assert _uploaded(moto, bucket) == []


def test_no_credentials_from_the_command_line_prints_no_traceback(moto, cluster, bucket, aws_env):
    """The same, as a user runs it: `python -m infra.submit_step`, one line, exit 4."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-m", "infra.submit_step", *_argv(moto, cluster, bucket)],
        cwd=root, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 4
    assert result.stderr.splitlines() == [result.stderr.strip()] and "no AWS credentials found" in result.stderr


def test_misspelled_region_names_the_flag_and_the_close_match(moto, cluster, bucket, aws_env, capsys):
    line = _mistake(_argv(moto, cluster, bucket, region="eu-wset-1"), capsys, submit_step.EXIT_USAGE)
    assert line == (
        "error: --region 'eu-wset-1': not a region where AWS has emr (did you mean 'eu-west-1' or 'us-west-1'?); "
        "for a region newer than this botocore, add --allow-unknown-region"
    )
    assert _uploaded(moto, bucket) == []


def test_allow_unknown_region_passes_the_region_check_and_the_bucket_must_then_be_in_it(
    moto, cluster, bucket, aws_env, capsys
):
    argv = _argv(moto, cluster, bucket, "--allow-unknown-region", region="xx-newregion-1")
    line = _mistake(argv, capsys, submit_step.EXIT_USAGE)
    assert line.startswith(f"error: --bucket '{bucket}' is in region {REGION}, not --region 'xx-newregion-1'"), line


def test_unknown_profile_is_named(moto, cluster, bucket, aws_env, capsys):
    line = _mistake(_argv(moto, cluster, bucket, "--profile", "dev"), capsys, submit_step.EXIT_USAGE)
    assert line.startswith("error: --profile 'dev': no such profile in the AWS config files"), line


def test_missing_bucket_is_named(moto, cluster, aws_env, capsys):
    line = _mistake(_argv(moto, cluster, "no-such-bucket-4711"), capsys, submit_step.EXIT_USAGE)
    assert (
        line == "error: --bucket 'no-such-bucket-4711': no such bucket; use the stack output BucketName of the "
        "Storage stack"
    )


@pytest.mark.parametrize(
    ("cluster_id", "expected"),
    [
        ("j-BOGUS0123", f"--cluster-id 'j-BOGUS0123': no such cluster in {REGION}; use the stack output ClusterId"),
        ("cluster-1", "--cluster-id 'cluster-1': not a cluster id; use the stack output ClusterId (j-...)"),
    ],
)
def test_bogus_cluster_id_is_found_before_the_code_is_uploaded(moto, bucket, aws_env, capsys, cluster_id, expected):
    line = _mistake(_argv(moto, cluster_id, bucket), capsys, submit_step.EXIT_USAGE)
    assert line.startswith(f"error: {expected}"), line
    assert _uploaded(moto, bucket) == []


def test_terminated_cluster_is_refused_before_the_upload(moto, cluster, bucket, aws_env, capsys):
    moto.client("emr", region=REGION).terminate_job_flows(JobFlowIds=[cluster])
    line = _mistake(_argv(moto, cluster, bucket), capsys, submit_step.EXIT_USAGE)
    assert f"--cluster-id '{cluster}': the cluster is TERMINATED and takes no more steps" in line
    assert _uploaded(moto, bucket) == []


def test_unknown_job_lists_the_jobs(moto, cluster, bucket, aws_env, capsys):
    line = _mistake(_argv(moto, cluster, bucket, "--job", "country_count"), capsys, submit_step.EXIT_USAGE)
    assert line.startswith("error: --job 'country_count': no spark_app/country_count.py; the jobs are: ")
    assert "country_counts" in line


def test_unreachable_endpoint_is_one_line(cluster, bucket, aws_env, capsys):
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = ["--cluster-id", cluster, "--bucket", bucket, "--source-stream", "s", "--sink-stream", "k",
            "--region", REGION, "--endpoint-url", f"http://127.0.0.1:{port}"]  # fmt: skip
    line = _mistake(argv, capsys, submit_step.EXIT_AWS)
    assert line.startswith(f"error: --bucket '{bucket}': AWS could not be reached"), line


def test_a_good_submission_passes_every_check(moto, cluster, bucket, aws_env, capsys):
    assert submit_step.main(_argv(moto, cluster, bucket)) == submit_step.EXIT_OK
    assert "submitted step s-" in capsys.readouterr().out
    assert len(_uploaded(moto, bucket)) == 2


@pytest.mark.parametrize(
    ("mistake", "code", "expected"),
    [
        ("region", 2, "error: --region 'eu-wset-1': not a region where AWS has emr (did you mean 'eu-west-1'"),
        ("bucket", 2, "error: --bucket 'no-such-bucket-4711': no such bucket"),
        ("cluster", 2, "error: --cluster-id 'j-BOGUS0123': no such cluster in"),
        ("credentials", 4, "error: no AWS credentials found: set AWS_PROFILE (or --profile)"),
    ],
)
def test_mistakes_from_the_command_line_are_one_line_and_upload_nothing(
    moto, cluster, bucket, aws_env, mistake, code, expected
):
    """As a user runs it: `python -m infra.submit_step`, exactly one line on stderr, the documented exit code, and
    nothing uploaded (the cluster is checked before the code goes up)."""
    import subprocess
    import sys

    argv = {
        "region": _argv(moto, cluster, bucket, region="eu-wset-1"),
        "bucket": _argv(moto, cluster, "no-such-bucket-4711"),
        "cluster": _argv(moto, "j-BOGUS0123", bucket),
        "credentials": _argv(moto, cluster, bucket),
    }[mistake]
    env = dict(os.environ)
    if mistake == "credentials":
        del env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-m", "infra.submit_step", *argv],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (result.returncode, result.stdout) == (code, ""), result.stderr
    assert result.stderr.splitlines() == [result.stderr.strip()], result.stderr
    assert result.stderr.startswith(expected), result.stderr
    assert _uploaded(moto, bucket) == []
