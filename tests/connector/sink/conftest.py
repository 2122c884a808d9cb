"""Fixtures of the sink's unit tests: moto's Kinesis in this process (``mock_aws``): real botocore calls, no server,
no Spark."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tests.connector.support.moto_sink_util import REGION, Streams


@pytest.fixture(scope="module")
def aws() -> Iterator[Any]:
    """moto's AWS for the module's tests, and a client to look at its streams (made once: clients are slow to make)."""
    with pytest.MonkeyPatch.context() as patch, mock_aws():
        patch.setenv("AWS_ACCESS_KEY_ID", "testing")
        patch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        yield boto3.client("kinesis", region_name=REGION)


_streams = itertools.count()


@pytest.fixture
def kinesis(aws: Any) -> Streams:
    """Two new streams of moto's Kinesis for one test."""
    number = next(_streams)
    streams = Streams(aws, f"orders-{number}", f"returns-{number}")
    aws.create_stream(StreamName=streams.orders, ShardCount=2)
    aws.create_stream(StreamName=streams.returns, ShardCount=1)
    return streams
