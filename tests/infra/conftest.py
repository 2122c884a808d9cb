"""Fixtures for the CDK tests: each app is built ONCE per session (jsii's node process costs seconds).

`project_root` is a copy of what the EMR stack ships (the wheel's sources and the jobs); when the sample job
`country_counts` has not landed yet, the copy gets a small stand-in entry file so the step can be synthesized.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

ROOT = Path(__file__).resolve().parents[2]
ACCOUNT = "123456789012"  # moto's default account, so deployed ARNs line up with the synthesized ones
REGION = "eu-west-1"
CONSUMER_ACCOUNT = "210987654321"
EXTERNAL_ID = "pipeline-external-id-42"
ALARM_EMAIL = "ops@example.com"


def _copy_root(target: Path, with_job: bool) -> Path:
    from infra.packaging import WHEEL_SOURCES

    for name in {*WHEEL_SOURCES, "spark_app"}:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, target / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif (ROOT / name).is_file():
            shutil.copy(ROOT / name, target / name)
    shutil.copy(ROOT / "requirements.txt", target / "requirements.txt")
    job = target / "spark_app" / "country_counts.py"
    job.parent.mkdir(parents=True, exist_ok=True)
    if with_job and not job.exists():
        job.write_text('"""stand-in entry file for the CDK tests"""\n')
    if not with_job:
        job.unlink(missing_ok=True)
    return target


@pytest.fixture(scope="session")
def project_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _copy_root(tmp_path_factory.mktemp("root"), with_job=True)


@pytest.fixture(scope="session")
def root_without_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _copy_root(tmp_path_factory.mktemp("root-nojob"), with_job=False)


@pytest.fixture(scope="session")
def names() -> dict[str, str]:
    """Unique names so that the moto deploy never meets leftovers of another test in the same server."""
    tag = uuid.uuid4().hex[:8]
    return {"stackPrefix": f"Infra{tag}", "sourceStreamName": f"src-{tag}", "sinkStreamName": f"snk-{tag}"}


@pytest.fixture(scope="session")
def pipeline(project_root: Path, names: dict[str, str]):
    """The default deployment plus a cross-account consumer, nag checks on (a finding fails the build)."""
    from infra.app import build_app

    context = {
        **names,
        "account": ACCOUNT,
        "region": REGION,
        "consumerAccountId": CONSUMER_ACCOUNT,
        "externalId": EXTERNAL_ID,
        "alarmEmail": ALARM_EMAIL,
    }
    return build_app(context=context, project_root=project_root, environ={})


@pytest.fixture(scope="session")
def variant(root_without_job: Path):
    """The other branches: on-demand streams, an existing subnet, no core nodes, no consumer, no job file, no
    alarm e-mail, alarm thresholds from context."""
    from infra.app import build_app

    context = {
        "stackPrefix": "Variant",
        "streamMode": "on-demand",
        "subnetId": "subnet-0123456789abcdef0",
        "coreInstanceCount": "0",
        "tlsCertificatesS3Uri": "s3://my-certs/emr/certs.zip",
        "iteratorAgeAlarmMs": "120000",
        "lagAlarmMs": "60000",
        "cloudwatchNamespace": "Team/Jobs",
    }
    return build_app(context=context, project_root=root_without_job, environ={})


@pytest.fixture(scope="session")
def templates(pipeline) -> dict:
    from aws_cdk.assertions import Template

    return {
        name: Template.from_stack(getattr(pipeline, name))
        for name in ("streams", "metadata", "storage", "access", "emr", "monitoring")
    }


@pytest.fixture(scope="session")
def cfn(templates) -> dict[str, dict]:
    """The same templates as plain dicts."""
    return {name: template.to_json() for name, template in templates.items()}


@pytest.fixture(scope="session")
def recorded_table_actions(moto, kinesalite) -> list[str]:
    """The DynamoDB actions the connector called on the metadata table in a recorded run (metadata_calls.py)."""
    from tests.infra.metadata_calls import record_table_actions

    return sorted(record_table_actions(moto, kinesalite))
