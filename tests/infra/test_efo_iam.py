"""The roles' enhanced fan-out actions are exactly what the connector calls: the consumer lifecycle, a
subscription and a deregistration run through a counting proxy in front of kinesis-mock, and the Kinesis actions
seen there are compared with infra.access's lists."""

from __future__ import annotations

from contextlib import closing

import pytest

from connector import aws
from connector.consumers import WaitPolicy, deregister_quietly, ensure_consumer, list_consumers, stream_arn
from connector.decode import ShardContext
from connector.fetch.efo import ShardSubscriber, subscription_client
from connector.offsets import TRIM_HORIZON, Position
from connector.retry import RetryPolicy
from infra.access import CONSUMER_ACTIONS, STREAM_ACTIONS
from localaws import LocalServer
from localaws.fault_proxy import FaultProxy
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY

# What the polling reader and the sink call: not part of enhanced fan-out.
NOT_EFO = {"ListShards", "GetShardIterator", "GetRecords", "PutRecord", "PutRecords"}


@pytest.mark.slow
def test_the_roles_allow_exactly_the_efo_actions_the_connector_calls(kinesis_mock: LocalServer, mock_stream) -> None:
    stream = mock_stream()
    retry = RetryPolicy(3, 10, 50)
    with FaultProxy(kinesis_mock.endpoint_url) as proxy:
        settings = aws.ClientSettings(
            "us-east-1", proxy.endpoint_url, access_key_id=DUMMY_ACCESS_KEY, secret_key=DUMMY_SECRET_KEY
        )
        kinesis = aws.kinesis_client(settings)
        consumer = ensure_consumer(kinesis, stream, "iam", retry, WaitPolicy(timeout_s=30, poll_s=0.1))
        list_consumers(kinesis, stream_arn(kinesis, stream, retry), retry)
        shard = ShardContext(stream, "shardId-000000000000", 0, 2**128 - 1)
        subscriber = ShardSubscriber(subscription_client(settings, 30), consumer.arn, shard, retry, consumer.name)
        with closing(subscriber.pages(Position(TRIM_HORIZON))) as pages:
            next(pages)
        assert deregister_quietly(kinesis, stream, "iam", retry)
    called = {f"kinesis:{action}" for action in proxy.calls}
    granted = {action for action in STREAM_ACTIONS + CONSUMER_ACTIONS if action.split(":")[1] not in NOT_EFO}
    assert called == granted
