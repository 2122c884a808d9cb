"""Sharing a shard (docs/source.md, "What the source costs a shard"): a query with the default options and the
default trigger beside another application that polls every shard once a second (``localaws.neighbour``, as AWS
Lambda does) leaves it its calls, idle and busy; two queries on one stream both keep up with a producer at half
the shard's read limit. Behind the quota-enforcing proxy; counts, not timings: calls and refusals as the proxy
counted them, every record read once by everyone."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from localaws import LocalServer
from localaws.neighbour import NEIGHBOUR_TOKEN, Neighbour
from localaws.quota_model import Quotas
from localaws.quota_proxy import QuotaProxy
from localaws.quota_stats import assert_refused_at_most
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY
from localaws.streams import put_records
from pyspark_aws_kinesis.shard_calls import SHARED_CALLS_PER_S
from tests.connector.queries.query_util import _committed
from tests.connector.support.source_util import FORMAT, wait_for

IDLE_S = 6.0  # how long the stream stays idle before the producer starts
GROUPS = {"neighbour": NEIGHBOUR_TOKEN}  # every other client is the query ("other")


def _default_query(spark, proxy: QuotaProxy, stream: str, where: Path):
    """A query as the docs' example has it: default options and the default trigger (as fast as Spark goes)."""
    return (
        spark.readStream.format(FORMAT)
        .option("kinesis.streamName", stream)
        .option("kinesis.endpointUrl", proxy.endpoint_url)
        .option("kinesis.awsAccessKeyId", DUMMY_ACCESS_KEY)
        .option("kinesis.awsSecretKey", DUMMY_SECRET_KEY)
        .option("kinesis.metadataPath", str(where / "meta"))
        .option("kinesis.startingPosition", "TRIM_HORIZON")
        .load()
        .writeStream.format("parquet")
        .option("path", str(where / "out"))
        .option("checkpointLocation", str(where / "checkpoint"))
        .start()
    )


def _produce(server: LocalServer, stream: str, ticks: int, per_tick: int, size: int, tick_s: float) -> list[bytes]:
    """``per_tick`` records of ``size`` bytes every ``tick_s``, ``ticks`` times, straight to the server (the
    producer is not what is measured); returns their data."""
    kinesis = server.client("kinesis")
    produced: list[bytes] = []
    for tick in range(ticks):
        batch = [(f"{tick:04d}-{i:04d}-".encode().ljust(size, b"x"), f"key-{tick}-{i}") for i in range(per_tick)]
        put_records(kinesis, stream, batch)
        produced += [data for data, _key in batch]
        time.sleep(tick_s)
    return produced


def _probes(proxy: QuotaProxy, stream: str) -> tuple[float, dict[str, int]]:
    """The proxy's clock and the query's GetRecords calls so far, per shard."""
    report = proxy.report(groups=GROUPS)
    by_shard = report.by("shard", stream=stream, client="other", action="GetRecords")
    return report.elapsed_s, {shard: tally.calls for shard, tally in by_shard.items()}


@pytest.mark.slow
def test_a_default_query_beside_a_neighbour_leaves_it_its_calls_idle_and_busy(
    spark, kinesalite: LocalServer, lite_stream, tmp_path
) -> None:
    stream = lite_stream(shards=2)
    with QuotaProxy(kinesalite.endpoint_url) as proxy, Neighbour(proxy.endpoint_url, stream) as neighbour:
        query = _default_query(spark, proxy, stream, tmp_path)
        try:
            wait_for(lambda: len(_probes(proxy, stream)[1]) == 2, what="the query's first probes")
            started, before = _probes(proxy, stream)
            time.sleep(IDLE_S)  # idle: only probes
            ended, after = _probes(proxy, stream)
            produced = _produce(kinesalite, stream, ticks=40, per_tick=10, size=100, tick_s=0.2)  # busy
            wait_for(lambda: len(_committed(spark, tmp_path / "out")) >= len(produced), what="the query to read all")
            wait_for(lambda: len(neighbour.read) >= len(produced), 30, what="the neighbour to read every record")
        finally:
            query.stop()
    report = proxy.report(groups=GROUPS)
    print(report.summary())
    assert Counter(_committed(spark, tmp_path / "out")) == Counter(produced)
    assert Counter(neighbour.read) == Counter(produced)
    assert_refused_at_most(report, 0.01, client="neighbour", stream=stream)
    # Every sliding second of the proxy's log, whoever of ours called (probes, reads, retries): the share kept.
    assert set(report.most_in_a_second("other", stream=stream).values()) <= set(range(1, SHARED_CALLS_PER_S + 1))
    idle = {shard: after[shard] - before[shard] for shard in after}
    # one a second, at each shard's turn of it (half a second to a second and a half apart): the window's first call
    # may be the turn before it
    assert all(calls <= ended - started + 2 for calls in idle.values()), (idle, ended - started)
    ours = report.tally(stream=stream, client="other", action="GetRecords")
    assert ours.calls > sum(after.values()) and ours.records >= len(produced)  # it did read through the proxy


@pytest.mark.slow
def test_two_default_queries_on_one_stream_both_keep_up_with_a_producer_at_half_the_read_limit(
    spark, kinesalite: LocalServer, lite_stream, tmp_path
) -> None:
    stream = lite_stream(shards=2)
    limit = 128 * 1024  # bytes read per second per shard (AWS: 2 MiB; the same rules, scaled down)
    size, per_tick, tick_s = 1024, 32, 0.25  # 128 KiB/s over 2 shards: half the read limit of each
    with QuotaProxy(kinesalite.endpoint_url, Quotas(get_records_bytes=limit)) as proxy:
        queries = [_default_query(spark, proxy, stream, tmp_path / name) for name in ("a", "b")]
        try:
            produced = _produce(kinesalite, stream, ticks=24, per_tick=per_tick, size=size, tick_s=tick_s)
            for name in ("a", "b"):
                wait_for(lambda name=name: len(_committed(spark, tmp_path / name / "out")) >= len(produced), 120)
            for query in queries:
                assert query.exception() is None and query.isActive  # throttling alone never fails a query
        finally:
            for query in queries:
                query.stop()
    report = proxy.report()
    print(report.summary())
    for name in ("a", "b"):
        assert Counter(_committed(spark, tmp_path / name / "out")) == Counter(produced)
    reads = report.tally(stream=stream, action="GetRecords")
    assert reads.records >= 2 * len(produced)  # each query read every record through the proxy
