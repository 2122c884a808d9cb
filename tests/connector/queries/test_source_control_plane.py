"""The source's control-plane calls stay within Kinesis's per-stream and per-account limits however many shards and
tasks a query has (docs/source.md, "What the source costs a shard"): the driver lists a stream's shards at most
once per ``kinesis.describeShardInterval``, and enhanced fan-out consumers are described once per query, on the
driver, never per task. Counted by the quota-enforcing proxy, per stream and action."""

from __future__ import annotations

import pytest

from localaws import LocalServer
from localaws.quota_proxy import QuotaProxy
from localaws.quota_stats import QuotaReport
from tests.connector.support.efo_util import efo_options
from tests.connector.support.source_util import next_batch, payloads, put_numbered, reader, roundtrip, source_options

SHARDS = 4
BATCHES = 3
CONSUMER_CALLS = ("DescribeStreamSummary", "DescribeStreamConsumer", "ListStreamConsumers", "RegisterStreamConsumer")


def _calls(proxy: QuotaProxy, stream: str, *actions: str) -> dict[str, int]:
    report: QuotaReport = proxy.report()
    return {action: report.tally(stream=stream, action=action).calls for action in actions}


def _run_batches(server: LocalServer, source, stream: str, start: dict) -> list[bytes]:
    """Micro-batches as Spark runs them (plan, one task per shard with records, read, commit; idle triggers
    between), ``BATCHES`` times records on every shard, each time until all of them are read; returns what was
    read."""
    read: list[bytes] = []
    for batch in range(BATCHES):
        produced = put_numbered(server, stream, f"b{batch}", 4 * SHARDS)
        while not set(produced) <= set(read):
            start, rows = next_batch(source, start)
            read += payloads(rows)
    return read


def test_a_stream_is_listed_once_per_interval_whatever_the_triggers_and_tasks(
    kinesalite: LocalServer, lite_stream, quota_proxy: QuotaProxy, tmp_path
) -> None:
    stream = lite_stream(shards=SHARDS)
    options = source_options(quota_proxy, stream, tmp_path, **{"kinesis.describeShardInterval": "1h"})
    source = reader(options)
    start = roundtrip(source.initialOffset())
    read = _run_batches(kinesalite, source, stream, start)
    assert sorted(read) == sorted(set(read)) and len(read) == BATCHES * 4 * SHARDS
    # One listing in the hour: the query's first; no trigger and no task listed again.
    assert _calls(quota_proxy, stream, "ListShards", *CONSUMER_CALLS) == {
        "ListShards": 1,
        **dict.fromkeys(CONSUMER_CALLS, 0),
    }


@pytest.mark.slow
def test_enhanced_fan_out_consumers_are_described_once_per_query_not_per_task(
    kinesis_mock: LocalServer, mock_stream, quota_proxy_mock: QuotaProxy, tmp_path
) -> None:
    stream = mock_stream(shards=SHARDS)
    options = efo_options(
        quota_proxy_mock,
        stream,
        tmp_path / "meta",
        **{"kinesis.describeShardInterval": "1h", "kinesis.requireConsumerDeregistration": "true"},
    )
    source = reader(options)
    start = roundtrip(source.initialOffset())  # registers the consumer and waits until it is ACTIVE
    at_start = _calls(quota_proxy_mock, stream, "ListShards", *CONSUMER_CALLS)
    assert at_start["RegisterStreamConsumer"] == 1 and at_start["DescribeStreamSummary"] == 1
    try:
        read = _run_batches(kinesis_mock, source, stream, start)
        after = _calls(quota_proxy_mock, stream, "ListShards", *CONSUMER_CALLS)
    finally:
        source.stop()  # deregisters, once
    assert sorted(read) == sorted(set(read)) and len(read) == BATCHES * 4 * SHARDS
    assert after == at_start  # tasks on every shard, batch after batch: not one more description or listing
    assert quota_proxy_mock.report().tally(stream=stream, action="SubscribeToShard").calls >= SHARDS
