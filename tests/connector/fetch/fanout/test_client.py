"""``pyspark_aws_kinesis.fetch.fanout.client.BrokeredSubscriber`` reading direct, without the subscription broker
(kinesis-mock): a refusal is waited out and reported in the read's result. Reads through the broker:
test_broker.py; the checks both ends make of each other: test_broker_security.py."""

from __future__ import annotations

from localaws import LocalServer
from localaws.fault_proxy import FaultProxy, Faults
from pyspark_aws_kinesis.fetch.decode import ShardContext
from pyspark_aws_kinesis.fetch.fanout.client import ENV_ENABLED, BrokeredSubscriber
from pyspark_aws_kinesis.fetch.range import FetchLimits, ShardRange, ShardTask
from pyspark_aws_kinesis.positions import TRIM_HORIZON, Position
from tests.connector.support.efo_util import FAST, SHARD0, SUBSCRIBE, _put, settings

IN_USE_CODE = "ResourceInUseException"


def test_a_direct_reads_refusals_reach_its_result(kinesis_mock: LocalServer, efo, monkeypatch) -> None:
    """A task reading direct (no broker) is refused once (ResourceInUseException): waited out, read, and the
    refusal is in the read's result (``refusedCalls``), as the polling reads' are."""
    stream, consumer = efo
    sequences = _put(kinesis_mock, stream, [b"a", b"b"])
    monkeypatch.setenv(ENV_ENABLED, "off")
    faults = Faults(errors=((IN_USE_CODE, 1.0),), actions=SUBSCRIBE, max_faults=1)
    with FaultProxy(kinesis_mock.endpoint_url, faults) as proxy:
        context = ShardContext(stream, SHARD0, 0, 2**128 - 1)
        transport = BrokeredSubscriber(settings(proxy.endpoint_url), 30.0, FAST, consumer.arn, "t", context, "s")
        shard_range = ShardRange(
            ShardTask(stream, SHARD0, 0, 2**128 - 1, Position(TRIM_HORIZON)), FetchLimits(), context
        )
        got = [row for batch in shard_range.batches(transport) for row in batch.column("sequenceNumber").to_pylist()]
    assert got == sequences and proxy.calls["SubscribeToShard"] == 2
    assert shard_range.result is not None and shard_range.result.refused_calls == transport.refused_calls == 1
    assert shard_range.result.to_json()["refusedCalls"] == 1
