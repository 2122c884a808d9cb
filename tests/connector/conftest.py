"""Fixtures for the connector's tests (the servers and Spark come from tests/conftest.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
from collections.abc import Iterator

import pytest

from pyspark_aws_kinesis.fetch.fanout import broker as efo_broker
from pyspark_aws_kinesis.fetch.fanout import protocol as efo_protocol
from pyspark_aws_kinesis.fetch.fanout.client import broker_pids


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A private EFO broker directory for one test (short: Unix socket paths are limited); every broker started
    there is killed after."""
    directory = tempfile.mkdtemp(prefix="efo-")
    monkeypatch.setenv(efo_protocol.ENV_DIR, directory)
    monkeypatch.setenv(efo_broker.ENV_IDLE_EXIT, "20")
    yield directory
    for pid in broker_pids(directory):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
