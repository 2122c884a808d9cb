"""The EMR Serverless stack (`-c serverless=true`): the application, its logging, the job role (the instance role's
statements less the cluster's disk key), the assets it may read, and the packed Python environment."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from infra import packaging, serverless, wheelhouse
from tests.infra.cfn import as_list, logical_id, policy_statements, render, resources_of_type
from tests.infra.conftest import ACCOUNT, REGION


def test_application_runs_the_release_on_graviton_and_stops_when_idle(cfn, pipeline):
    (application,) = resources_of_type(cfn["serverless"], "AWS::EMRServerless::Application").values()
    props = application["Properties"]
    assert (props["ReleaseLabel"], props["Type"], props["Architecture"]) == ("emr-spark-8.0.0", "Spark", "ARM64")
    assert props["AutoStartConfiguration"] == {"Enabled": True}
    assert props["AutoStopConfiguration"] == {"Enabled": True, "IdleTimeoutMinutes": 15}
    assert props["MaximumCapacity"] == {"Cpu": "16 vCPU", "Memory": "64 GB"}
    assert "NetworkConfiguration" not in props


def test_application_logs_to_cloudwatch_and_to_the_bucket(cfn, pipeline):
    (application,) = resources_of_type(cfn["serverless"], "AWS::EMRServerless::Application").values()
    monitoring = application["Properties"]["MonitoringConfiguration"]
    group_id = logical_id(pipeline.serverless.log_group)
    assert monitoring["CloudWatchLoggingConfiguration"] == {"Enabled": True, "LogGroupName": {"Ref": group_id}}
    log_uri = render(monitoring["S3MonitoringConfiguration"]["LogUri"])
    assert log_uri.startswith(f"s3://<import {pipeline.storage.stack_name}:") and log_uri.endswith("/logs/serverless/")
    group = cfn["serverless"]["Resources"][group_id]["Properties"]
    assert group["RetentionInDays"] == 30  # logRetentionDays, like the bucket's logs/


@pytest.mark.parametrize(("days", "expected"), [(1, 1), (2, 3), (30, 30), (31, 60), (3650, 3653), (9999, 3653)])
def test_log_retention_is_the_shortest_allowed_that_keeps_the_configured_days(days, expected):
    assert serverless.retention_days(days) == expected


def _by_sid(template: dict, role) -> dict[str, dict]:
    return {s["Sid"]: s for lid, s in policy_statements(template) if lid == logical_id(role)}


def test_job_role_is_for_emr_serverless_of_this_account_only(cfn, pipeline):
    role = cfn["access"]["Resources"][logical_id(pipeline.access.serverless_job_role)]["Properties"]
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "emr-serverless.amazonaws.com"}
    assert trust["Condition"]["StringEquals"] == {"aws:SourceAccount": ACCOUNT}
    source_arn = render(trust["Condition"]["ArnLike"]["aws:SourceArn"])
    assert source_arn == f"arn:<AWS::Partition>:emr-serverless:{REGION}:{ACCOUNT}:/applications/*"


def test_job_role_has_the_instance_roles_statements_less_the_disk_key(cfn, pipeline):
    job = _by_sid(cfn["access"], pipeline.access.serverless_job_role)
    instance = _by_sid(cfn["access"], pipeline.access.instance_role)
    assert sorted(job) == sorted(set(instance) - {"ClusterDiskKey"})
    for sid, statement in job.items():
        assert statement == instance[sid], sid


def test_job_role_may_publish_metrics_in_the_jobs_namespace(cfn, pipeline):
    (policy,) = resources_of_type(cfn["monitoring"], "AWS::IAM::Policy").values()
    roles = [render(role) for role in policy["Properties"]["Roles"]]
    assert len(roles) == 2
    assert any(f"ExportsOutputRef{logical_id(pipeline.access.serverless_job_role)}" in role for role in roles)


def test_job_role_writes_only_its_log_group_and_reads_only_the_stacks_assets(cfn, pipeline):
    policies = resources_of_type(cfn["serverless"], "AWS::IAM::Policy")
    statements = {s["Sid"]: s for _, s in policy_statements(cfn["serverless"])}
    assert sorted(statements) == ["DescribeLogGroups", "JobLogStreams", "ReadCodeAssets"]
    assert as_list(statements["JobLogStreams"]["Action"]) == [
        "logs:CreateLogStream",
        "logs:DescribeLogStreams",
        "logs:PutLogEvents",
    ]
    assert statements["JobLogStreams"]["Resource"] == {"Fn::GetAtt": [logical_id(pipeline.serverless.log_group), "Arn"]}
    assert (
        render(statements["DescribeLogGroups"]["Resource"])
        == f"arn:<AWS::Partition>:logs:{REGION}:{ACCOUNT}:log-group:*"
    )
    keys = sorted(render(r).rsplit("/", 1)[1] for r in statements["ReadCodeAssets"]["Resource"])
    assets = (pipeline.serverless.venv, pipeline.serverless.pyfiles, pipeline.serverless.job)
    assert keys == sorted(asset.s3_object_key for asset in assets)
    for policy in policies.values():
        (role,) = policy["Properties"]["Roles"]
        assert f"ExportsOutputRef{logical_id(pipeline.access.serverless_job_role)}" in render(role)


def test_outputs_name_what_the_submitter_needs(cfn):
    assert {"ApplicationId", "VenvArchiveUri", "LogGroupName", "LogUri"} <= set(cfn["serverless"]["Outputs"])
    assert "ServerlessJobRoleArn" in cfn["access"]["Outputs"]


def test_no_serverless_stack_or_job_role_unless_asked(variant):
    assert variant.serverless is None and variant.access.serverless_job_role is None
    assert len(variant.stacks) == 6


# --- the packed environment ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def venv_archive(pipeline, templates) -> tarfile.TarFile:
    """The archive as the stack staged it into the cloud assembly (`templates` has synthesized the app)."""
    staged = Path(pipeline.app.outdir) / pipeline.serverless.venv.asset_path
    assert staged.name.endswith(".tgz")  # Spark unpacks spark.archives by extension; .gz alone it would not
    return tarfile.open(fileobj=io.BytesIO(staged.read_bytes()), mode="r:gz")


def test_environment_is_a_venv_of_the_image_python_with_the_wheelhouse_for_aarch64(venv_archive, stand_in_wheels):
    members = {m.name: m for m in venv_archive.getmembers()}
    python = wheelhouse.TARGET.interpreter
    for name in ("python", "python3", python):
        assert members[f"bin/{name}"].issym() and members[f"bin/{name}"].linkname == f"/usr/bin/{python}"
    cfg = venv_archive.extractfile(members["pyvenv.cfg"]).read().decode()
    assert "include-system-site-packages = false" in cfg and f"version = {wheelhouse.TARGET.python}" in cfg
    site = f"lib/{python}/site-packages/"
    assert f"{site}pyspark_aws_kinesis/options/__init__.py" in members and f"{site}kinesis_generator/cli.py" in members
    installed = {
        name.split("/")[3].split("-")[0].lower().replace("_", "-")
        for name in members
        if name.startswith(site) and name.endswith(".dist-info/METADATA")
    }
    # Every pin of the lock, the aarch64-only ones too (pip installed for the target, not for this machine).
    assert installed == {pin.name for pin in wheelhouse.parse_lock(stand_in_wheels)} | {"pyspark-aws-kinesis"}
    assert all(m.mtime == 315532800 and m.uid == 0 for m in members.values())


def test_job_driver_runs_the_environment_python_on_driver_and_executors():
    driver = packaging.serverless_job_driver(
        job_uri="s3://b/code/j.py", pyfiles_uri="s3://b/code/p.zip", venv_uri="s3://a/v.tgz", job_args=["--x", "1"]
    )
    submit = driver["sparkSubmit"]
    assert submit["entryPoint"] == "s3://b/code/j.py" and submit["entryPointArguments"] == ["--x", "1"]
    words = submit["sparkSubmitParameters"].split()
    assert words[::2] == ["--conf"] * (len(words) // 2)
    conf = dict(word.split("=", 1) for word in words[1::2])
    assert conf["spark.archives"] == "s3://a/v.tgz#environment"
    for key in (
        "spark.emr-serverless.driverEnv.PYSPARK_DRIVER_PYTHON",
        "spark.emr-serverless.driverEnv.PYSPARK_PYTHON",
        "spark.executorEnv.PYSPARK_PYTHON",
    ):
        assert conf[key] == "./environment/bin/python"
    assert conf["spark.submit.pyFiles"] == "s3://b/code/p.zip"
