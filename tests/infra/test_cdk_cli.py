"""CI's `cdk synth`: the pinned CLI runs app.py offline, with telemetry and notices off, and writes every template.

It runs in a copy of the checkout whose infra/emr-lock.txt is the tests' stand-in lock, with its wheels in the
wheel cache ($KINESIS_WHEEL_CACHE), as a synth on a machine that fetched the real lock's wheels once does: the
synth itself needs no network (the real lock's wheels are fetched by `make synth` the first time)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CDK = ROOT / "node_modules" / ".bin" / "cdk"
STACKS = ["Streams", "Metadata", "Storage", "Access", "Emr", "Monitoring", "Serverless"]


def run_synth(root: Path, cache: Path, out_dir: Path, *context: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "KINESIS_WHEEL_CACHE": str(cache),
        "CDK_DISABLE_CLI_TELEMETRY": "true",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        # No account or credentials: synth must not need them (nor the network).
        "AWS_ACCESS_KEY_ID": "",
        "AWS_SECRET_ACCESS_KEY": "",
        "AWS_PROFILE": "",
    }
    args = [str(CDK), "synth", "--no-notices", "--quiet", "--output", str(out_dir)]
    for item in context:
        args += ["--context", item]
    return subprocess.run(args, cwd=root, env=env, capture_output=True, text=True, timeout=240)


@pytest.fixture(scope="module")
def checkout(project_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """project_root (the wheel's sources, the jobs, the stand-in lock) plus the app, its code and the tools."""
    root = tmp_path_factory.mktemp("checkout")
    shutil.copytree(project_root, root, dirs_exist_ok=True)
    shutil.copytree(ROOT / "infra", root / "infra", dirs_exist_ok=True, ignore=shutil.ignore_patterns("emr-lock.txt"))
    for name in ("app.py", "cdk.json"):
        shutil.copy(ROOT / name, root / name)
    for name in (".venv", "node_modules"):
        (root / name).symlink_to((ROOT / name).resolve())
    return root


@pytest.fixture(scope="module")
def cloud_assembly(checkout: Path, wheel_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synth") / "cdk.out"
    context = ["consumerAccountId=210987654321", "externalId=ci-external-id-0123", "serverless=true"]
    result = run_synth(checkout, wheel_cache, out, *context)
    assert result.returncode == 0, result.stderr[-3000:]
    return out


@pytest.mark.slow
def test_pinned_cli_synthesizes_every_stack(cloud_assembly):
    manifest = json.loads((cloud_assembly / "manifest.json").read_text())
    assert {f"KinesisSpark{name}" for name in STACKS} <= set(manifest["artifacts"])
    for name in STACKS:
        template = json.loads((cloud_assembly / f"KinesisSpark{name}.template.json").read_text())
        assert template["Resources"], name
    access = json.loads((cloud_assembly / "KinesisSparkAccess.template.json").read_text())
    assert "CrossAccountRoleArn" in access["Outputs"]


@pytest.mark.slow
def test_templates_pass_cfn_lint(cloud_assembly):
    """CloudFormation's own resource schemas (cfn-lint), errors only: W6001 (an output that re-exports an
    import) is a style warning."""
    templates = sorted(str(p) for p in cloud_assembly.glob("*.template.json"))
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    result = subprocess.run(
        [str(cfn_lint), "--format", "parseable", *templates], capture_output=True, text=True, timeout=120
    )
    # parseable: <file>:<line>:<col>:<line>:<col>:<rule>:<message>
    rules = [(line, line.split(":")) for line in result.stdout.splitlines()]
    errors = [line for line, parts in rules if len(parts) > 5 and parts[5].startswith("E")]
    assert not errors, "\n".join(errors)
    assert result.returncode in (0, 4), result.stderr  # 4: warnings only


@pytest.mark.slow
def test_pinned_cli_fails_with_the_config_error(checkout, wheel_cache, tmp_path):
    result = run_synth(checkout, wheel_cache, tmp_path / "cdk.out", "releaseLabel=emr-7.9.0")
    assert result.returncode != 0
    assert "context 'releaseLabel': got 'emr-7.9.0'" in result.stderr
