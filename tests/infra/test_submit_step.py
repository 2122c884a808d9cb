"""infra.submit_step against moto's EMR and S3 APIs (moto keeps a step RUNNING forever and never completes it).

Covered on moto: the upload, the step's command, progress output, the timeout path and the cluster-gone path.
The COMPLETED and FAILED paths are covered by `step_outcome` on DescribeStep-shaped answers, since moto has
no way to move a step to those states.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from infra import packaging, submit_step
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
    code = submit_step.upload_code(s3, bucket, "country_counts", project_root)
    assert code.pyfiles_uri.startswith(f"s3://{bucket}/code/") and code.pyfiles_uri.endswith("/pyfiles.zip")
    assert code.job_uri == code.pyfiles_uri.replace("pyfiles.zip", "country_counts.py")
    entry = s3.get_object(Bucket=bucket, Key=code.job_uri.split("/", 3)[3])["Body"].read()
    assert entry == (project_root / "spark_app" / "country_counts.py").read_bytes()
    # Same code, same place: a re-submit reuses the objects instead of piling up copies.
    assert submit_step.upload_code(s3, bucket, "country_counts", project_root) == code


def test_unknown_job_is_a_clear_error(moto, bucket, project_root):
    with pytest.raises(FileNotFoundError, match=r"job 'no_such_job'.*does not exist"):
        submit_step.upload_code(moto.client("s3", region=REGION), bucket, "no_such_job", project_root)


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
    monkeypatch.setattr(submit_step.upload_code, "__defaults__", (project_root,))
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


def test_cli_rejects_a_non_positive_timeout(capsys):
    base = ["--cluster-id", "j-1", "--bucket", "b", "--source-stream", "s", "--sink-stream", "k", "--region", REGION]
    with pytest.raises(SystemExit) as exit_info:
        submit_step.main([*base, "--timeout-seconds", "0"])
    assert exit_info.value.code == 2
    assert "--timeout-seconds: got 0.0; allowed: a number > 0" in capsys.readouterr().err


def test_module_runs_without_loading_the_cdk():
    import subprocess
    import sys

    code = "import sys, infra.submit_step; print('aws_cdk' in sys.modules)"
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
