"""CI's `cdk synth`: the pinned CLI runs app.py offline, with telemetry and notices off, and writes every template."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CDK = ROOT / "node_modules" / ".bin" / "cdk"
STACKS = ["Streams", "Metadata", "Storage", "Access", "Emr"]


def run_synth(out_dir: Path, *context: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
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
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)


@pytest.mark.slow
def test_pinned_cli_synthesizes_every_stack(tmp_path):
    result = run_synth(tmp_path / "cdk.out", "consumerAccountId=210987654321", "externalId=ci-external-id")
    assert result.returncode == 0, result.stderr[-3000:]
    manifest = json.loads((tmp_path / "cdk.out" / "manifest.json").read_text())
    assert {f"KinesisSpark{name}" for name in STACKS} <= set(manifest["artifacts"])
    for name in STACKS:
        template = json.loads((tmp_path / "cdk.out" / f"KinesisSpark{name}.template.json").read_text())
        assert template["Resources"], name
    access = json.loads((tmp_path / "cdk.out" / "KinesisSparkAccess.template.json").read_text())
    assert "CrossAccountRoleArn" in access["Outputs"]


@pytest.mark.slow
def test_pinned_cli_fails_with_the_config_error(tmp_path):
    result = run_synth(tmp_path / "cdk.out", "releaseLabel=emr-7.9.0")
    assert result.returncode != 0
    assert "context 'releaseLabel': got 'emr-7.9.0'" in result.stderr
