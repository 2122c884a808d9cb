"""Fixtures for the CDK tests: each app is built ONCE per session (jsii's node process costs seconds).

`project_root` is a copy of what the EMR stack ships (the wheel's sources and the jobs); when the sample job
`country_counts` has not landed yet, the copy gets a small stand-in entry file so the step can be synthesized.
Its `infra/emr-lock.txt` is a stand-in lock (tests/infra/wheels.py) whose wheels are already in the wheel cache
`wheel_cache`, so the stacks build their wheelhouse and Serverless environment offline, as a synth with a
filled cache does.
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
SHARED_CONSUMERS = "country-counts,audit"
EXTERNAL_ID = "pipeline-external-id-42"
ALARM_EMAIL = "ops@example.com"


@pytest.fixture(scope="session")
def wheel_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("wheel-cache")


@pytest.fixture(scope="session")
def stand_in_wheels(tmp_path_factory: pytest.TempPathFactory, wheel_cache: Path) -> Path:
    """A lock of stand-ins for every pin of the real infra/emr-lock.txt, its wheels in `wheel_cache`."""
    from infra.wheelhouse import LOCK_PATH
    from tests.infra.wheels import stand_in_lock

    folder = tmp_path_factory.mktemp("stand-in-wheels")
    stand_in_lock(ROOT / LOCK_PATH, folder / "emr-lock.txt", wheel_cache, folder / "wheels")
    return folder / "emr-lock.txt"


@pytest.fixture(scope="session")
def infra_environ(wheel_cache: Path) -> dict[str, str]:
    """What build_app sees of the environment: no CDK_DEFAULT_* (no account from a profile), the test cache."""
    return {"KINESIS_WHEEL_CACHE": str(wheel_cache)}


def _copy_root(target: Path, with_job: bool, lock: Path) -> Path:
    from infra.packaging import WHEEL_SOURCES
    from infra.wheelhouse import LOCK_PATH

    for name in {*WHEEL_SOURCES, "spark_app"}:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, target / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif (ROOT / name).is_file():
            shutil.copy(ROOT / name, target / name)
    shutil.copy(ROOT / "requirements.txt", target / "requirements.txt")
    (target / LOCK_PATH).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(lock, target / LOCK_PATH)
    job = target / "spark_app" / "country_counts.py"
    job.parent.mkdir(parents=True, exist_ok=True)
    if with_job and not job.exists():
        job.write_text('"""stand-in entry file for the CDK tests"""\n')
    if not with_job:
        job.unlink(missing_ok=True)
    return target


@pytest.fixture(scope="session")
def project_root(tmp_path_factory: pytest.TempPathFactory, stand_in_wheels: Path) -> Path:
    return _copy_root(tmp_path_factory.mktemp("root"), with_job=True, lock=stand_in_wheels)


@pytest.fixture(scope="session")
def root_without_job(tmp_path_factory: pytest.TempPathFactory, stand_in_wheels: Path) -> Path:
    return _copy_root(tmp_path_factory.mktemp("root-nojob"), with_job=False, lock=stand_in_wheels)


@pytest.fixture(scope="session")
def names() -> dict[str, str]:
    """Unique names so that the moto deploy never meets leftovers of another test in the same server."""
    tag = uuid.uuid4().hex[:8]
    return {"stackPrefix": f"Infra{tag}", "sourceStreamName": f"src-{tag}", "sinkStreamName": f"snk-{tag}"}


@pytest.fixture(scope="session")
def pipeline(project_root: Path, names: dict[str, str], infra_environ: dict[str, str]):
    """The default deployment plus a cross-account consumer and EMR Serverless, nag checks on (a finding fails
    the build)."""
    from infra.app import build_app

    context = {
        **names,
        "account": ACCOUNT,
        "region": REGION,
        "consumerAccountId": CONSUMER_ACCOUNT,
        "externalId": EXTERNAL_ID,
        "alarmEmail": ALARM_EMAIL,
        "serverless": True,
    }
    return build_app(context=context, project_root=project_root, environ=infra_environ)


@pytest.fixture(scope="session")
def variant(root_without_job: Path, infra_environ: dict[str, str]):
    """The other branches: on-demand streams with warm throughput and 10 MiB records, an existing subnet, no core
    nodes, the consumer account reading by resource policy (no role) through two shared consumers, no job file, no
    alarm e-mail, alarm thresholds from context."""
    from infra.app import build_app

    context = {
        "stackPrefix": "Variant",
        "streamMode": "on-demand",
        "warmThroughputMiBps": "200",
        "maxRecordSizeKiB": "10240",
        "consumerAccountId": CONSUMER_ACCOUNT,
        "crossAccountAccess": "resourcePolicy",
        "sharedConsumers": SHARED_CONSUMERS,
        "subnetId": "subnet-0123456789abcdef0",
        "coreInstanceCount": "0",
        "tlsCertificatesS3Uri": "s3://my-certs/emr/certs.zip",
        "iteratorAgeAlarmMs": "120000",
        "lagAlarmMs": "60000",
        "cloudwatchNamespace": "Team/Jobs",
    }
    return build_app(context=context, project_root=root_without_job, environ=infra_environ)


@pytest.fixture(scope="session")
def templates(pipeline) -> dict:
    from aws_cdk.assertions import Template

    return {
        name: Template.from_stack(getattr(pipeline, name))
        for name in ("streams", "metadata", "storage", "access", "emr", "monitoring", "serverless")
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
