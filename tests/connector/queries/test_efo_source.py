"""Enhanced fan-out wired into the source (kinesis-mock): the consumer made ACTIVE once on the driver, its ARN in
the partitions, every shard read through SubscribeToShard (counted at the fault proxy), a batch that runs again
replays the same rows, KPL aggregates unpacked, a bad position is data loss, and deregistration when the query
ends; then a Spark streaming query through SubscribeToShard, exactly once across a restart."""

from __future__ import annotations

import time

import pytest

from localaws import LocalServer
from localaws.fault_proxy import FaultProxy, Faults
from localaws.streams import put_records
from pyspark_aws_kinesis.consumers import ACTIVE, Consumer, list_consumers, stream_arn
from pyspark_aws_kinesis.fetch.iterators import DataLossError
from pyspark_aws_kinesis.fetch.range import FetchLimits, ShardRange, ShardTask
from pyspark_aws_kinesis.kpl import Aggregator
from pyspark_aws_kinesis.positions import AFTER_SEQUENCE_NUMBER, Position
from pyspark_aws_kinesis.retry import RetryPolicy
from pyspark_aws_kinesis.source.stream_reader import KinesisPartition
from tests.connector.queries.query_util import _committed
from tests.connector.support.efo_util import efo_options, kinesis, subscriber
from tests.connector.support.source_util import (
    next_batch,
    payloads,
    put_numbered,
    read_all,
    reader,
    roundtrip,
    start_parquet_query,
    wait_for,
)

pytestmark = pytest.mark.slow  # kinesis-mock refuses a resubscription to a consumer+shard for ~5 s


def _consumers(server: LocalServer, stream: str) -> dict[str, str]:
    client = kinesis(server.endpoint_url)
    return {c.name: c.status for c in list_consumers(client, stream_arn(client, stream, RetryPolicy()), RetryPolicy())}


def test_batches_read_through_subscribe_to_shard_replay_exactly_and_deregister(
    kinesis_mock: LocalServer, mock_stream, tmp_path
) -> None:
    stream = mock_stream(shards=1)
    with FaultProxy(kinesis_mock.endpoint_url) as proxy:
        options = efo_options(proxy, stream, tmp_path / "meta", **{"kinesis.requireConsumerDeregistration": "true"})
        source = reader(options)
        start = roundtrip(source.initialOffset())
        name = options["kinesis.consumerName"]
        assert _consumers(kinesis_mock, stream) == {name: ACTIVE}  # registered when the query started
        produced = put_numbered(kinesis_mock, stream, "a", 7)
        end = roundtrip(source.latestOffset(start, None))
        partitions = list(source.partitions(start, end))
        (partition,) = partitions
        assert isinstance(partition, KinesisPartition) and partition.consumer_arn(stream) is not None
        before = dict(proxy.calls)
        rows = read_all(source, partitions)
        assert payloads(rows) == produced
        assert proxy.calls["SubscribeToShard"] > before.get("SubscribeToShard", 0)  # the executor subscribed ...
        # ... with the ARN from the partition (no consumer lookup), and read nothing with GetRecords
        assert proxy.calls["DescribeStreamConsumer"] == before["DescribeStreamConsumer"]
        assert proxy.calls["GetRecords"] == before.get("GetRecords", 0)
        # The batch runs again (task retry): the same rows, even with more records waiting.
        put_numbered(kinesis_mock, stream, "b", 3)
        assert payloads(read_all(source, list(source.partitions(start, end)))) == produced
        source.commit(end)
        _, rows = next_batch(source, end)
        assert [row["data"] for row in rows] == [f"b-{i:04d}".encode() for i in range(3)]
        source.stop()  # the query ends
    assert _consumers(kinesis_mock, stream).get(name) in (None, "DELETING")


def test_kpl_aggregates_and_a_missing_shard_through_subscribe_to_shard(
    kinesis_mock: LocalServer, mock_stream, tmp_path
) -> None:
    stream = mock_stream(shards=1)
    aggregator = Aggregator()
    for i in range(4):
        aggregator.add(f"u{i}".encode(), f"k{i}")
    aggregate = aggregator.flush()
    assert aggregate is not None
    put_records(kinesis_mock.client("kinesis"), stream, [(aggregate.data, aggregate.partition_key)])
    source = reader(efo_options(kinesis_mock, stream, tmp_path / "meta"))
    _, rows = next_batch(source, roundtrip(source.initialOffset()))
    assert [(row["data"], row["subSequenceNumber"]) for row in rows] == [(f"u{i}".encode(), i) for i in range(4)]
    # A shard that SubscribeToShard reports missing is lost data for the range rules (kinesis.failOnDataLoss).
    consumer = Consumer(source.settings.efo.consumer_name, source.offsets.planner.consumer_arns()[stream], ACTIVE)
    shard_id = rows[0]["shardId"]
    task = ShardTask(stream, shard_id, 0, 2**128 - 1, Position(AFTER_SEQUENCE_NUMBER, rows[0]["sequenceNumber"]))
    faults = Faults(errors=(("ResourceNotFoundException", 1.0),), actions=frozenset({"SubscribeToShard"}))
    with FaultProxy(kinesis_mock.endpoint_url, faults) as proxy:
        transport = subscriber(proxy.endpoint_url, consumer, stream, shard_id)
        strict = ShardRange(task, FetchLimits(), source.settings.shard_context(task), fail_on_data_loss=True)
        with pytest.raises(DataLossError, match="no longer exists"):
            list(strict.batches(transport))
        lenient = ShardRange(task, FetchLimits(), source.settings.shard_context(task))
        assert list(lenient.batches(transport)) == []
    assert lenient.result is not None and lenient.result.data_loss is not None
    assert lenient.result.data_loss.kind == "shard gone" and lenient.result.shard_end


def test_streaming_query_through_subscribe_to_shard_exactly_once_across_a_restart_and_deregistered(
    spark, kinesis_mock: LocalServer, mock_stream, tmp_path
) -> None:
    stream = mock_stream(shards=2)
    with FaultProxy(kinesis_mock.endpoint_url) as proxy:
        options = efo_options(proxy, stream, tmp_path / "meta", **{"kinesis.requireConsumerDeregistration": "true"})
        name = options["kinesis.consumerName"]

        def deregistered() -> bool:
            return _consumers(kinesis_mock, stream).get(name) in (None, "DELETING")

        output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

        def start():
            return start_parquet_query(spark, options, output, checkpoint, trigger="200 milliseconds")

        def committed() -> list[bytes]:
            return _committed(spark, output)

        produced = put_numbered(kinesis_mock, stream, "a", 12)
        query = start()
        wait_for(lambda: len(committed()) >= len(produced), what="the first records")
        query.stop()
        wait_for(deregistered, 30, what="the consumer deregistered when the query stopped")
        produced += put_numbered(kinesis_mock, stream, "b", 8)  # while stopped
        query = start()
        try:
            wait_for(lambda: len(committed()) >= len(produced), what="every record after the restart")
        finally:
            query.stop()
        wait_for(deregistered, 30, what="the consumer deregistered when the query stopped")
        subscribed = proxy.calls["SubscribeToShard"]
    assert sorted(committed()) == sorted(produced)
    assert subscribed >= 2  # read through enhanced fan-out


def test_latest_through_subscribe_to_shard_reads_only_what_came_after_the_start(
    kinesis_mock: LocalServer, mock_stream, tmp_path
) -> None:
    stream = mock_stream(shards=2)
    put_numbered(kinesis_mock, stream, "old", 5)
    source = reader(efo_options(kinesis_mock, stream, tmp_path / "meta", **{"kinesis.startingPosition": "LATEST"}))
    start = roundtrip(source.initialOffset())  # LATEST = the arrival time of now, replayable
    time.sleep(0.05)
    produced = put_numbered(kinesis_mock, stream, "new", 6)
    _, rows = next_batch(source, start)
    assert sorted(payloads(rows)) == sorted(produced)
