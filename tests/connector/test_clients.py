"""What the one place that builds AWS clients (pyspark_aws_kinesis.aws.clients) sends, whatever botocore version
is installed: the pyspark 4.0.2 venv runs these with the lowest botocore we support."""

from __future__ import annotations

import json
import types
from typing import Any

import pytest

from pyspark_aws_kinesis.aws.clients import kinesis_client, kinesis_reader_client, send_timestamps_to_the_millisecond
from pyspark_aws_kinesis.aws.settings import ClientSettings
from pyspark_aws_kinesis.fetch.fanout.subscriber import starting_position, subscription_client
from pyspark_aws_kinesis.fetch.iterators import iterator_request
from pyspark_aws_kinesis.positions import AT_TIMESTAMP, Position

# 2026-11-26T12:34:56.789Z: the milliseconds are what a whole-second Timestamp loses
AT_MS = 1795696496789


def _sent_body(kinesis: Any, operation: str, params: dict[str, Any]) -> dict[str, Any]:
    """The JSON body ``kinesis`` would send for ``operation``, as serialized for the wire (nothing is sent)."""
    model = kinesis.meta.service_model.operation_model(operation)
    return json.loads(kinesis._serializer.serialize_to_request(params, model)["body"])


@pytest.mark.parametrize("make", [kinesis_client, kinesis_reader_client], ids=["client", "reader"])
def test_get_shard_iterator_sends_at_timestamp_to_the_millisecond(make: Any) -> None:
    kinesis = make(ClientSettings("us-east-1", "http://127.0.0.1:9", "AKIDCLIENTSTEST", "secret"))
    params = {"StreamName": "s", "ShardId": "shardId-000000000000"}
    params.update(iterator_request(Position(AT_TIMESTAMP, timestamp_ms=AT_MS)))
    assert _sent_body(kinesis, "GetShardIterator", params)["Timestamp"] == AT_MS / 1000


def test_subscribe_to_shard_sends_at_timestamp_to_the_millisecond() -> None:
    kinesis = subscription_client(ClientSettings("us-east-1", "http://127.0.0.1:9", "AKIDCLIENTSTEST", "secret"), 5.0)
    params = {
        "ConsumerARN": "arn:aws:kinesis:us-east-1:123456789012:stream/s/consumer/c:1",
        "ShardId": "shardId-000000000000",
        "StartingPosition": starting_position(Position(AT_TIMESTAMP, timestamp_ms=AT_MS)),
    }
    assert _sent_body(kinesis, "SubscribeToShard", params)["StartingPosition"]["Timestamp"] == AT_MS / 1000


@pytest.mark.parametrize("depth", [0, 1, 2], ids=["no-serializer", "no-converter", "validated-no-converter"])
def test_a_botocore_without_the_internals_keeps_its_own_converter(depth: int) -> None:
    innermost = types.SimpleNamespace()
    client = innermost
    for _ in range(depth):
        client = types.SimpleNamespace(_serializer=client)
    send_timestamps_to_the_millisecond(client)  # must not fail the client's creation, nor add a converter
    assert not hasattr(innermost, "_timestamp_unixtimestamp")
