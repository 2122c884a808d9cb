"""The roles' enhanced fan-out actions are exactly what the connector calls. Everything the connector does with
``kinesis.consumerType=SubscribeToShard`` runs through a counting proxy in front of kinesis-mock: a query's
lifecycle (register at start, a batch read through SubscribeToShard, deregistration when it ends, with
``requireConsumerDeregistration``) and the clean-up command (``python -m pyspark_aws_kinesis consumers
list|register|deregister``). Every Kinesis action seen there must be granted by infra.access, and every action
the roles grant beyond polling and the sink must be among them; the cross-account role, which may not write,
must still allow every one of these calls."""

from __future__ import annotations

import pytest

from infra.access import CONSUMER_ACTIONS, STREAM_ACTIONS, STREAM_READ_ACTIONS
from localaws import LocalServer
from localaws.fault_proxy import FaultProxy
from tests.connector.support.consumers_util import _cli
from tests.connector.support.efo_util import efo_options
from tests.connector.support.source_util import next_batch, put_numbered, reader, roundtrip

# What only the polling reader (and the planner's probes) and the sink call: granted, but not for enhanced fan-out.
NOT_EFO = {"ListShards", "GetShardIterator", "GetRecords", "PutRecord", "PutRecords"}


@pytest.mark.slow
def test_the_roles_allow_exactly_the_efo_actions_the_connector_calls(
    kinesis_mock: LocalServer, mock_stream, tmp_path
) -> None:
    stream = mock_stream()
    with FaultProxy(kinesis_mock.endpoint_url) as proxy:
        options = efo_options(proxy, stream, tmp_path, **{"kinesis.requireConsumerDeregistration": "true"})
        source = reader(options)
        start = roundtrip(source.initialOffset())
        put_numbered(kinesis_mock, stream, "r", 3)
        _, rows = next_batch(source, start)
        assert len(rows) == 3
        source.stop()  # deregisters the query's consumer
        for args in (("register", "--name", "by-hand"), ("list",), ("deregister", "--name", "by-hand")):
            done = _cli(proxy, args[0], "--stream", stream, *args[1:])  # type: ignore[arg-type]
            assert done.returncode == 0, done.stderr
    called = {f"kinesis:{action}" for action in proxy.calls}
    granted = set(STREAM_ACTIONS + CONSUMER_ACTIONS)
    assert called <= granted, f"called but not granted: {sorted(called - granted)}"
    efo_granted = {action for action in granted if action.split(":")[1] not in NOT_EFO}
    assert efo_granted <= called, f"granted but never called: {sorted(efo_granted - called)}"
    assert {"kinesis:SubscribeToShard", "kinesis:DeregisterStreamConsumer"} <= called
    # The cross-account role grants no writes, yet everything an enhanced fan-out reader calls.
    assert called <= set(STREAM_READ_ACTIONS + CONSUMER_ACTIONS), sorted(called - set(STREAM_READ_ACTIONS))
