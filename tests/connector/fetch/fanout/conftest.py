"""Fixtures for the enhanced fan-out transport's tests: a one-shard stream with an ACTIVE consumer (the broker
directory fixture is in tests/connector/conftest.py)."""

from __future__ import annotations

import pytest

from localaws import LocalServer
from tests.connector.support.efo_util import active_consumer


@pytest.fixture
def efo(kinesis_mock: LocalServer, mock_stream):
    """A one-shard stream with an ACTIVE consumer: (stream, consumer)."""
    stream = mock_stream(shards=1)
    return stream, active_consumer(kinesis_mock.endpoint_url, stream)
