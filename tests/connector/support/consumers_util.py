"""Helpers for the consumer tests: the names of a stream's registered consumers, and the consumers command run as a
user would."""

from __future__ import annotations

import os
import subprocess
import sys

from localaws import LocalServer, project_root
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY
from pyspark_aws_kinesis.consumers import list_consumers, stream_arn
from tests.connector.support.efo_util import FAST, kinesis


def _names(server: LocalServer, stream: str) -> dict[str, str]:
    client = kinesis(server.endpoint_url)
    return {c.name: c.status for c in list_consumers(client, stream_arn(client, stream, FAST), FAST)}


def _cli(server: LocalServer | None, *args: str, keys: bool = True, **aws_env: str) -> subprocess.CompletedProcess:
    """Run ``python -m pyspark_aws_kinesis consumers *args`` (against ``server`` unless None) as a user would; ``keys``
    False: no credentials anywhere (no keys, no profile files, no instance metadata)."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
        "PYTHONPATH": str(project_root()),
    }
    if keys:
        env.update(AWS_ACCESS_KEY_ID=DUMMY_ACCESS_KEY, AWS_SECRET_ACCESS_KEY=DUMMY_SECRET_KEY)
    env.update(aws_env)
    endpoint = ["--endpoint-url", server.endpoint_url] if server else []
    command = [sys.executable, "-m", "pyspark_aws_kinesis", "consumers", *args, *endpoint]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, cwd=project_root())
