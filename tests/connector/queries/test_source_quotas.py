"""The source within a shard's read quota, behind the quota-enforcing proxy (``localaws.quota_proxy``) with limits
small enough that refusals are certain: reads and probes that Kinesis refuses back off and go on (the query never
fails for throttling alone, never asks again at once), every record is still read once, and the refusals are
counted per shard in the query's progress report. Counts only, no timings. The transport's own share:
tests/connector/fetch/polling/test_transport_quotas.py."""

from __future__ import annotations

import time

import pytest

from localaws import LocalServer
from localaws.quota_model import ManualClock
from localaws.quota_proxy import QuotaProxy
from pyspark_aws_kinesis.clock import now_ms
from pyspark_aws_kinesis.positions import shard_key
from pyspark_aws_kinesis.source import probe as probe_module
from tests.connector.support.clock_util import FrozenClock
from tests.connector.support.read_quotas_util import ONE_CALL_A_SECOND
from tests.connector.support.source_util import payloads, put_numbered, read_all, reader, roundtrip, source_options


@pytest.mark.slow
def test_a_refused_probe_keeps_the_query_going_and_is_reported_per_shard(
    kinesalite: LocalServer, lite_stream, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = lite_stream(shards=1)
    # Both clocks move by hand: the proxy's second and the prober's backoff end when the test says, however long a
    # loaded machine takes between two probes.
    clock = FrozenClock(time.monotonic())
    monkeypatch.setattr(probe_module, "time", clock)
    with QuotaProxy(kinesalite.endpoint_url, ONE_CALL_A_SECOND, clock=ManualClock()) as proxy:
        options = source_options(proxy, stream, tmp_path, **{"kinesis.clientNumRetries": "0"})
        source = reader(options)
        start = roundtrip(source.initialOffset())
        assert roundtrip(source.latestOffset(start, None)) == start  # idle: the shard's one call of this second
        prober = source.offsets.planner.prober
        calls = prober.calls
        clock.now += prober.interval_s  # the shard's turn again, within the proxy's same second
        assert roundtrip(source.latestOffset(start, None)) == start  # refused, not raised
        assert prober.calls == calls + 1
        key = shard_key(stream, "shardId-000000000000")
        report = source.reportLatestOffset()
        assert report is not None
        assert report["refusedCalls"] == 1 and report["refusedCallsPerShard"] == {key: 1}
        clock.now += prober.interval_s
        assert roundtrip(source.latestOffset(start, None)) == start  # backed off: not asked at its turn
        assert prober.calls == calls + 1
        assert proxy.report().tally(stream=stream, action="GetRecords").refused == 1
        produced = put_numbered(kinesalite, stream, "a", 5)
        (state,) = prober._states.values()
        clock.now += state.backoff_s  # the backed-off interval is over
        proxy.clock.advance(1.0)  # and the proxy's second with it
        end = roundtrip(source.latestOffset(start, None))
        assert end != start and prober.calls == calls + 2
        proxy.clock.advance(1.0)  # the read's call, if it makes one, in a second of its own
        assert payloads(read_all(source, list(source.partitions(start, end)))) == produced


def test_a_shard_with_more_waiting_is_planned_at_once_and_its_read_keeps_the_interval_after_the_last_call(
    kinesalite: LocalServer, lite_stream, tmp_path
) -> None:
    stream = lite_stream(shards=1)
    produced = put_numbered(kinesalite, stream, "a", 5)
    interval_ms = 4000  # far longer than reading and planning take, even on a loaded machine
    options = source_options(
        kinesalite,
        stream,
        tmp_path,
        **{"kinesis.getRecords.fetchIntervalMs": str(interval_ms), "kinesis.maxFetchRecordsPerShard": "2"},
    )
    source = reader(options)
    start = roundtrip(source.initialOffset())
    end = roundtrip(source.latestOffset(start, None))
    assert payloads(read_all(source, list(source.partitions(start, end)))) == produced[:2]  # stopped at the cap
    source.commit(end)
    calls = source.offsets.planner.prober.calls
    following = roundtrip(source.latestOffset(end, None))  # at once: the next trigger does not wait for the interval
    assert following != end and source.offsets.planner.prober.calls == calls  # planned without a probe
    (partition,) = source.partitions(end, following)
    (task,) = partition.tasks
    assert task.last_call_ms is not None and task.last_call_ms <= now_ms()  # the read waits from there
    assert payloads(read_all(source, [partition])) == produced[2:4]


def test_the_read_a_probe_planned_keeps_the_interval_after_the_probes_call(
    kinesalite: LocalServer, lite_stream, tmp_path
) -> None:
    stream = lite_stream(shards=1)
    produced = put_numbered(kinesalite, stream, "a", 3)
    source = reader(source_options(kinesalite, stream, tmp_path))
    start = roundtrip(source.initialOffset())
    before = now_ms()
    end = roundtrip(source.latestOffset(start, None))
    assert source.offsets.planner.prober.calls == 1  # the probe that saw the records planned the batch
    (partition,) = source.partitions(start, end)
    (task,) = partition.tasks
    assert task.last_call_ms is not None and before <= task.last_call_ms <= now_ms()  # the probe's call
    assert payloads(read_all(source, [partition])) == produced


def test_every_call_of_a_read_counts_in_the_shards_second_not_only_its_last(
    kinesalite: LocalServer, lite_stream, quota_proxy: QuotaProxy, tmp_path
) -> None:
    """A read that took a few records a call made several GetRecords before it reached the shard's tip. The driver
    counts each of them in the shard's second before it probes the shard again, as AWS counts the shard's calls:
    hearing only of the last, a probe right after such a read would be the shard's fifth or sixth call of that
    second, and a neighbour's call (or ours) refused."""
    stream = lite_stream(shards=1)
    produced = put_numbered(kinesalite, stream, "a", 5)  # the probe holds 1, the read takes 2 + 2, then finds 0
    options = source_options(quota_proxy, stream, tmp_path, **{"kinesis.getRecords.numberOfRecordsPerFetch": "2"})
    source = reader(options)
    start = roundtrip(source.initialOffset())
    end = roundtrip(source.latestOffset(start, None))
    assert payloads(read_all(source, list(source.partitions(start, end)))) == produced
    source.commit(end)
    source.latestOffset(end, None)  # the driver hears of the read (and may probe the shard)
    now = time.monotonic()
    made = quota_proxy.report().tally(stream=stream, action="GetRecords").calls  # the probes' and the read's
    assert made >= 4, f"{made} GetRecords in all: the read did not take its records in several calls"
    counted = source.offsets.planner.prober.calls_within_window(shard_key(stream, "shardId-000000000000"), now)
    assert counted == made  # all started within the last second (~0.6 s from the first to the last)
