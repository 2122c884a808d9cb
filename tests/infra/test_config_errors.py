"""The CDK app meets a context typo (`npx cdk synth -c sourceShard=4`): a key that is none of the app's settings
stops the synth with one line and a "did you mean", instead of synthesizing the defaults without a word. The keys
the CDK itself puts in the context (feature flags, its `aws:cdk:*` settings, cached lookups, CLI settings) pass.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra.config import ConfigError, InfraConfig, is_cdk_key

ROOT = Path(__file__).resolve().parents[2]
CDK_JSON = json.loads((ROOT / "cdk.json").read_text())["context"]
# What the CDK CLI (2.1148) hands the app in CDK_CONTEXT_JSON besides cdk.json's keys and -c, and keys it keeps in
# cdk.context.json (cached lookups, `cdk acknowledge`).
CDK_OWN = {
    "aws:cdk:enable-path-metadata": True,
    "aws:cdk:enable-asset-metadata": True,
    "aws:cdk:version-reporting": True,
    "aws:cdk:bundling-stacks": ["**"],
    "@aws-cdk/core:failSynthOnValidationErrors": False,
    "availability-zones:account=123456789012:region=eu-west-1": ["eu-west-1a"],
    "acknowledged-issue-numbers": [12345],
}


def load(context: dict) -> InfraConfig:
    return InfraConfig.from_context(context.get, {}, keys=context)


def error_of(context: dict) -> str:
    with pytest.raises(ConfigError) as error:
        load(context)
    return str(error.value)


def test_cdk_json_and_the_cdks_own_keys_pass():
    assert load({**CDK_JSON, **CDK_OWN}) == InfraConfig()
    assert all(is_cdk_key(key) for key in CDK_OWN)
    assert not any(is_cdk_key(key) for key in CDK_JSON if key != "cli-telemetry" and not key.startswith("@"))


@pytest.mark.parametrize(
    ("key", "suggested"),
    [("sourceShard", "sourceShards"), ("sourceshards", "sourceShards"), ("releaselabel", "releaseLabel")],
)
def test_a_misspelled_key_is_one_line_with_did_you_mean(key, suggested):
    message = error_of({**CDK_JSON, **CDK_OWN, key: "4"})
    assert message == (
        f"CDK context {key!r}: not a setting of this app (did you mean {suggested!r}?); allowed: the keys of "
        "cdk.json's context, account and region (docs/infra.md, Settings)"
    )


def test_a_key_like_no_setting_is_named_without_a_guess():
    message = error_of({"frobnicate": "yes"})
    assert message.startswith("CDK context 'frobnicate': not a setting of this app; allowed: ")


def test_an_unknown_key_is_listed_with_the_other_problems():
    message = error_of({"sourceShard": "4", "sinkShards": 0})
    assert message.splitlines() == [
        "invalid CDK context:",
        "  context 'sinkShards': got 0; allowed: an integer from 1 to 500",
        "  context 'sourceShard': not a setting of this app (did you mean 'sourceShards'?); allowed: the keys of "
        "cdk.json's context, account and region (docs/infra.md, Settings)",
    ]


def test_app_py_refuses_a_context_override_typo(capsys):
    import app

    assert app.main({"sourceShard": "4"}) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [err.strip()] and "did you mean 'sourceShards'?" in err


def test_app_py_refuses_a_typo_given_with_dash_c():
    """As `npx cdk synth -c sourceShard=4` runs it: the context comes in CDK_CONTEXT_JSON; exit 2, one line."""
    context = {**CDK_JSON, **CDK_OWN, "sourceShard": "4"}
    env = {**os.environ, "CDK_CONTEXT_JSON": json.dumps(context), "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    done = subprocess.run(
        [sys.executable, "app.py"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=180
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.splitlines() == [
        "CDK context 'sourceShard': not a setting of this app (did you mean 'sourceShards'?); allowed: the keys of "
        "cdk.json's context, account and region (docs/infra.md, Settings)"
    ]
    assert "Traceback" not in done.stderr
