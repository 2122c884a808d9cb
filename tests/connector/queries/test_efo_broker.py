"""A Spark streaming query through the enhanced fan-out subscription broker (kinesis-mock): N batches, one
subscription, the broker killed mid-query. The broker itself: tests/connector/fetch/fanout/test_broker.py."""

from __future__ import annotations

import os
import signal

import pytest

from localaws import LocalServer
from localaws.fault_proxy import FaultProxy
from pyspark_aws_kinesis.fetch.fanout.client import ENV_ENABLED, broker_dir, broker_pids
from tests.connector.queries.query_util import _committed
from tests.connector.support.efo_util import efo_options, sockets_to
from tests.connector.support.source_util import put_numbered, start_parquet_query, wait_for


@pytest.mark.slow
def test_streaming_query_batches_share_one_subscription_and_survive_a_killed_broker(
    spark, kinesis_mock: LocalServer, mock_stream, tmp_path
) -> None:
    assert os.environ.get(ENV_ENABLED, "on") != "off"
    stream = mock_stream(shards=1)
    with FaultProxy(kinesis_mock.endpoint_url) as proxy:
        options = efo_options(proxy, stream, tmp_path / "meta")
        output = tmp_path / "out"
        before = set(broker_pids(broker_dir()))
        query = start_parquet_query(spark, options, output, tmp_path / "checkpoint", trigger="200 milliseconds")
        try:
            produced: list[bytes] = []

            def round_of(number: int) -> None:
                produced.extend(put_numbered(kinesis_mock, stream, f"r{number}", 3))
                wait_for(lambda: len(_committed(spark, output)) >= len(produced), what=f"round {number}")

            for number in range(4):  # one batch (or more) per round
                round_of(number)
            assert proxy.calls["SubscribeToShard"] == 1  # 4 batches or more (each round waited for the last)
            # the query's broker (a job of its own): the new one subscribed through this test's proxy (another test
            # session of this user may start brokers at the same time)
            proxy_port = int(proxy.endpoint_url.rsplit(":", 1)[1])
            (pid,) = [pid for pid in set(broker_pids(broker_dir())) - before if sockets_to(proxy_port, pid)]
            os.kill(pid, signal.SIGKILL)
            for number in range(4, 6):
                round_of(number)
        finally:
            query.stop()
    rows = spark.read.parquet(str(output)).select("data", "sequenceNumber").collect()
    assert [bytes(row.data) for row in sorted(rows, key=lambda row: int(row.sequenceNumber))] == produced
