"""``pyspark_aws_kinesis.fetch.fanout.protocol``, the wire between a task and its job's subscription broker: requests
and pages cross as data (JSON and raw bytes, no class named), and a page of another shape is refused. No server."""

from __future__ import annotations

import json

import pytest

from pyspark_aws_kinesis.aws.settings import AssumeRole, ClientSettings
from pyspark_aws_kinesis.fetch.decode import ShardContext
from pyspark_aws_kinesis.fetch.fanout import protocol as efo_protocol
from pyspark_aws_kinesis.positions import AT_SEQUENCE_NUMBER, Position
from pyspark_aws_kinesis.retry import RetryPolicy
from tests.connector.support.efo_util import FULL, _page


def test_requests_and_pages_cross_the_socket_as_data() -> None:
    """No server: a request (with a role and its external ID) and a page go through the wire format unchanged, and
    the wire names no class: JSON objects and a blob."""
    role = AssumeRole("arn:aws:iam::123456789012:role/reader", "session", external_id="x" * 20)
    client = ClientSettings("us-east-1", "https://kinesis.us-east-1.amazonaws.com", "AK", "SK", "TOKEN", role=role)
    context = ShardContext("s", "shardId-000000000000", *FULL)
    request = efo_protocol.Request(
        client, 60.0, RetryPolicy(), "arn", "name", context, Position(AT_SEQUENCE_NUMBER, "5", 2)
    )
    assert efo_protocol.Request.from_json(json.loads(json.dumps(request.to_json()))) == request
    page = _page(("10", 0), ("30", 0), ("30", 1))
    page.data[1] = bytes(range(256))  # any bytes
    message, blob = efo_protocol.page_to_wire(page)
    assert efo_protocol.page_from_wire(json.loads(json.dumps(message)), blob) == page
    assert efo_protocol.socket_name("j") == f"broker-{efo_protocol.PROTOCOL}-j.sock"  # a new protocol, a new socket


@pytest.mark.parametrize(
    "change",
    [
        lambda m: m.update(sizes=[1, 1, 1]),  # the blob does not add up
        lambda m: m.update(keys=["k"]),  # a column of another length
        lambda m: m.update(subs=[0, "1", 0]),  # a value of another type
        lambda m: m.update(subs=[0, True, 0]),  # a bool is no int
        lambda m: m.update(evil="__reduce__"),  # a field a page does not have
    ],
)
def test_a_page_of_another_shape_is_refused(change) -> None:
    message, blob = efo_protocol.page_to_wire(_page(("10", 0), ("30", 0), ("30", 1)))
    change(message)
    with pytest.raises(efo_protocol.ProtocolError):
        efo_protocol.page_from_wire(message, blob)
