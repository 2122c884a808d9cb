"""What keeps a record's way to the row short (bench/latency.py measures it; nothing here is timed): a read short of
its limit at the tip asks once, a read that saw the next record lets the next batch be planned without a probe.
What keeps an idle shard cheap: a probe answer is reused for the probe interval whatever the trigger, and a read
that ended at the tip counts as a probe."""

from __future__ import annotations

import pickle
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from localaws import LocalServer
from pyspark_aws_kinesis.aws.clients import kinesis_reader_client
from pyspark_aws_kinesis.fetch.reads import STOP_BOUND
from pyspark_aws_kinesis.positions import shard_key
from pyspark_aws_kinesis.source import probe as probe_module
from pyspark_aws_kinesis.source.offsets import parse_offset
from tests.connector.support.clock_util import FrozenClock
from tests.connector.support.efo_util import efo_options
from tests.connector.support.source_util import (
    next_batch,
    next_planned,
    payloads,
    plan_first_batch,
    put_numbered,
    read_all,
    reader,
    roundtrip,
    source_options,
)


@contextmanager
def counted_calls(client, *actions: str) -> Iterator[list[str]]:
    """Every call of ``actions`` ``client`` makes meanwhile."""
    calls: list[str] = []
    hooks = [
        (f"before-call.kinesis.{action}", lambda action=action, **_kwargs: calls.append(action)) for action in actions
    ]
    for event, hook in hooks:
        client.meta.events.register(event, hook)
    try:
        yield calls
    finally:
        for event, hook in hooks:
            client.meta.events.unregister(event, hook)


def test_a_read_short_of_its_limit_at_the_tip_asks_once(kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    stream = lite_stream(shards=1)
    produced = put_numbered(kinesalite, stream, "r", 3)
    for per_call, calls_wanted in (("10000", 1), ("2", 2)):  # a full page may have more behind it
        options = source_options(
            kinesalite, stream, tmp_path / per_call, **{"kinesis.getRecords.numberOfRecordsPerFetch": per_call}
        )
        source = reader(options)
        start, end = plan_first_batch(source)
        with counted_calls(kinesis_reader_client(source.settings.client), "GetRecords") as calls:
            rows = read_all(source, list(source.partitions(start, end)))
        assert payloads(rows) == produced
        assert len(calls) == calls_wanted, f"{per_call} per call: {len(calls)} GetRecords for 3 records"


def test_a_read_that_met_its_bound_in_a_full_answer_plans_the_next_batch_without_a_probe(
    kinesalite: LocalServer, lite_stream, tmp_path
) -> None:
    """Records put after the plan that came in the answer where the read met its bound are in the batch (fetching
    them again next batch would spend the read quota twice); that answer was full, so the next batch is planned
    without a probe and reads the rest, each record once."""
    stream = lite_stream(shards=1)
    first = put_numbered(kinesalite, stream, "a", 3)
    source = reader(source_options(kinesalite, stream, tmp_path, **{"kinesis.getRecords.numberOfRecordsPerFetch": "3"}))
    start, end = plan_first_batch(source)
    time.sleep(0.05)  # arrival times have millisecond precision: the next records arrive after the plan
    later = put_numbered(kinesalite, stream, "b", 5)
    taken = payloads(read_all(source, list(source.partitions(start, end))))
    kept = len(taken) - len(first)
    assert taken == first + later[:kept] and 0 < kept < len(later)
    source.commit(end)
    probes = source.offsets.planner.prober.calls
    following = roundtrip(source.latestOffset(end, None))
    assert following != end, "the next batch was not planned"
    assert source.offsets.planner.prober.calls == probes  # the read stopped at the bound: no probe needed
    reads = source.settings.metadata_store(str(tmp_path)).get_shard_reads(
        parse_offset(end).source_id, 0, [(stream, "shardId-000000000000")]
    )
    assert reads[(stream, "shardId-000000000000")].stop == STOP_BOUND
    assert shard_key(stream, "shardId-000000000000") in parse_offset(following).active()
    assert payloads(read_all(source, list(source.partitions(end, following)))) == later[kept:]


PROBE_EVERY_SECOND = {"kinesis.probeIntervalMs": "1000"}  # the default (source_options probes at every plan)


def test_an_idle_shard_is_probed_once_per_interval_however_often_triggers_come(
    kinesalite: LocalServer, lite_stream, tmp_path, monkeypatch
) -> None:
    stream = lite_stream(shards=1)
    source = reader(source_options(kinesalite, stream, tmp_path, **PROBE_EVERY_SECOND))
    start = roundtrip(source.initialOffset())
    prober = source.offsets.planner.prober
    assert prober.interval_s == 1.0
    assert roundtrip(source.latestOffset(start, None)) == start  # idle: one probe
    calls = prober.calls
    (state,) = prober._states.values()
    # The prober's clock stops at the probe: the shard's turn comes at some moment of each interval, and how long
    # a loaded machine takes over the triggers below must not decide whether it came.
    clock = FrozenClock(state.probed_at)
    monkeypatch.setattr(probe_module, "time", clock)
    clock.now += 0.45 * prober.interval_s  # triggers within half an interval of the probe never ask
    for _ in range(5):  # and more, at once: the default trigger asks as fast as Spark can
        assert roundtrip(source.latestOffset(start, None)) == start
    assert prober.calls == calls
    clock.now += 1.1 * prober.interval_s  # more than an interval since half an interval after it: its turn came
    for _ in range(5):
        assert roundtrip(source.latestOffset(start, None)) == start
    assert prober.calls == calls + 1


def test_a_read_that_ended_at_the_tip_counts_as_a_probe(
    kinesalite: LocalServer, lite_stream, tmp_path, monkeypatch
) -> None:
    stream = lite_stream(shards=1)
    first = put_numbered(kinesalite, stream, "a", 3)
    # The read's own calls wait out the fetch interval after the probe (3 records, a first probe of Limit 1: 1.5 s
    # once); the probe interval is far longer than the test.
    slow = {"kinesis.probeIntervalMs": "30000", "kinesis.getRecords.fetchIntervalMs": "1500"}
    source = reader(source_options(kinesalite, stream, tmp_path, **slow))
    start, end = plan_first_batch(source)
    prober = source.offsets.planner.prober
    (state,) = prober._states.values()
    probed = state.probed_at
    assert payloads(read_all(source, list(source.partitions(start, end)))) == first
    read_done = time.monotonic()
    source.commit(end)
    later = put_numbered(kinesalite, stream, "b", 2)
    calls = prober.calls
    # The prober's clock stops when the read returned: how long a loaded machine takes to get to the next line
    # must not decide whether the busy interval has passed.
    clock = FrozenClock(read_done)
    monkeypatch.setattr(probe_module, "time", clock)
    assert roundtrip(source.latestOffset(end, None)) == end  # the read's last call said "nothing": no probe yet
    assert prober.calls == calls
    (state,) = prober._states.values()
    assert probed + 1.4 < state.probed_at < read_done + 0.01  # that call, a fetch interval after the probe, is one
    clock.now = state.probed_at + prober.busy_interval_s  # a busy shard (it just had records): asked again
    following = roundtrip(source.latestOffset(end, None))
    assert prober.calls == calls + 1 and following != end
    assert payloads(read_all(source, list(source.partitions(end, following)))) == later


def test_a_busy_shard_is_asked_at_the_read_pace_and_an_idle_one_at_the_probe_interval(
    kinesalite: LocalServer, lite_stream, tmp_path
) -> None:
    stream = lite_stream(shards=1)
    intervals = {"kinesis.probeIntervalMs": "30000", "kinesis.getRecords.fetchIntervalMs": "2000"}
    source = reader(source_options(kinesalite, stream, tmp_path, **intervals))
    start = roundtrip(source.initialOffset())
    prober = source.offsets.planner.prober
    assert (prober.interval_s, prober.busy_interval_s) == (30.0, pytest.approx(1.75))  # 7/8 of the fetch interval
    defaults = {"kinesis.probeIntervalMs": "1000", "kinesis.getRecords.fetchIntervalMs": "200"}
    prober_by_default = reader(source_options(kinesalite, stream, tmp_path, **defaults)).offsets.planner.prober
    assert prober_by_default.busy_interval_s == pytest.approx(0.175)  # 200 ms triggers a few ms early still ask
    assert prober_by_default.calls_per_s == 4  # of the shard's 5 calls a second: one left for a neighbour
    assert roundtrip(source.latestOffset(start, None)) == start  # never asked: asked at once, finds nothing
    (state,) = prober._states.values()
    assert not state.busy
    put_numbered(kinesalite, stream, "a", 2)
    state.probed_at -= 2.0  # a fetch interval: not enough for an idle shard
    assert roundtrip(source.latestOffset(start, None)) == start and prober.calls == 1
    state.probed_at -= 43.0  # 1.5 probe intervals: its turn of the interval came (0.5-1.5 intervals after the last)
    end = roundtrip(source.latestOffset(start, None))
    assert end != start and prober.calls == 2 and state.busy
    read_all(source, list(source.partitions(start, end)))  # Limit 1 held: one more call, 2 s after the probe
    source.commit(end)
    assert roundtrip(source.latestOffset(end, None)) == end and prober.calls == 2  # the read's last call counts
    (state,) = prober._states.values()  # the shard's new position: busy, since a read took records there
    assert state.busy
    state.probed_at -= 2.0  # a fetch interval after the read's last call
    assert roundtrip(source.latestOffset(end, None)) == end and prober.calls == 3  # asked: nothing, idle again
    assert not state.busy
    state.probed_at -= 2.0
    assert roundtrip(source.latestOffset(end, None)) == end and prober.calls == 3


def test_a_probe_that_found_a_few_records_is_the_read_itself(kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    """The probe's answer goes to the batch's task whole: the read returns its records without a call, and its
    NextShardIterator lets the next probe start without GetShardIterator. One GetRecords per batch, not three."""
    stream = lite_stream(shards=1)
    first = put_numbered(kinesalite, stream, "a", 2)
    source = reader(source_options(kinesalite, stream, tmp_path))
    start, end = plan_first_batch(source)  # the first probe asks for 1 record: the size is not known yet
    assert payloads(read_all(source, list(source.partitions(start, end)))) == first
    source.commit(end)
    later = put_numbered(kinesalite, stream, "b", 5)
    client = kinesis_reader_client(source.settings.client)
    with counted_calls(client, "GetRecords", "GetShardIterator") as calls:
        following = roundtrip(source.latestOffset(end, None))
        assert calls == ["GetRecords"]  # the probe, with the last read's iterator
        (partition,) = source.partitions(end, following)
        (task,) = partition.tasks
        assert task.held is not None and task.held.limit > 5  # by the record size the first probe learnt
        executor = pickle.loads(pickle.dumps(source))
        rows = [row for batch in executor.read(pickle.loads(pickle.dumps(partition))) for row in batch.to_pylist()]
        assert payloads(rows) == later
        assert calls == ["GetRecords"]  # the read made no call
        source.commit(following)
        assert roundtrip(source.latestOffset(following, None)) == following  # the next probe: nothing new
        assert calls == ["GetRecords", "GetRecords"]  # with the probe's own NextShardIterator: no GetShardIterator


def test_a_steady_shard_is_read_without_a_probe_and_its_stop_costs_one_empty_batch(
    kinesalite: LocalServer, lite_stream, tmp_path
) -> None:
    """Records at five triggers in a row make a shard steady: the next trigger plans it without a call, and its
    read's one GetRecords takes what had arrived by then, records put after the planning too. When the records
    stop, that read finds none: one empty batch; then the shard is probed as a quiet one, and no batch runs."""
    stream = lite_stream(shards=1)
    source = reader(source_options(kinesalite, stream, tmp_path))
    client = kinesis_reader_client(source.settings.client)
    start = roundtrip(source.initialOffset())
    for batch in range(5):
        produced = put_numbered(kinesalite, stream, f"s{batch}-", 2)
        start, rows = next_batch(source, start)
        assert payloads(rows) == produced
    before = put_numbered(kinesalite, stream, "before", 2)
    with counted_calls(client, "GetRecords", "GetShardIterator") as calls:
        end = next_planned(source, start)
        assert calls == []  # planned without asking the shard
        (partition,) = source.partitions(start, end)
        (task,) = partition.tasks
        assert task.held is None and task.handoff is not None and task.not_before_ms is not None
        after = put_numbered(kinesalite, stream, "after", 3)  # put after the planning, before the read
        assert payloads(read_all(source, [partition])) == before + after
        assert calls == ["GetRecords"]  # the read's one call, with the last read's iterator
    source.commit(end)
    empty, rows = next_batch(source, end)  # the records stopped: the steady shard's read finds none, once
    assert rows == [] and empty != end
    for _ in range(4):  # then nothing is planned (a quiet shard is probed; its answers say "nothing")
        time.sleep(source.offsets.planner.prober.interval_s)
        assert roundtrip(source.latestOffset(empty, None)) == empty


def test_a_held_answer_that_was_full_is_read_on_from_its_iterator(
    kinesalite: LocalServer, lite_stream, tmp_path
) -> None:
    stream = lite_stream(shards=1)
    first = put_numbered(kinesalite, stream, "a", 4)
    source = reader(source_options(kinesalite, stream, tmp_path))
    start, end = plan_first_batch(source)  # Limit 1: the held answer is full, more may follow
    (partition,) = source.partitions(start, end)
    assert partition.tasks[0].held is not None and partition.tasks[0].held.limit == 1
    with counted_calls(kinesis_reader_client(source.settings.client), "GetRecords", "GetShardIterator") as calls:
        assert payloads(read_all(source, [partition])) == first
    assert calls == ["GetRecords"]  # the other three, from the held answer's NextShardIterator


def test_a_partitions_next_shard_is_asked_while_the_first_one_is_read(
    kinesalite: LocalServer, lite_stream, tmp_path
) -> None:
    stream = lite_stream(shards=2)
    produced = put_numbered(kinesalite, stream, "a", 20)  # 20 partition keys: both shards get records
    settings = {"kinesis.shardsPerPartition": "2", "kinesis.getRecords.numberOfRecordsPerFetch": "100"}
    source = reader(source_options(kinesalite, stream, tmp_path, **settings))  # one GetRecords per shard
    start, end = plan_first_batch(source)
    (partition,) = source.partitions(start, end)
    assert len(partition.tasks) == 2
    executor = pickle.loads(pickle.dumps(source))
    with counted_calls(kinesis_reader_client(source.settings.client), "GetRecords") as calls:
        batches = executor.read(pickle.loads(pickle.dumps(partition)))
        first = next(batches)  # the first shard's only page (at the tip): nothing of the second shard yet
        deadline = time.monotonic() + 30
        while len(calls) < 2 and time.monotonic() < deadline:  # the second shard's call runs on its own
            time.sleep(0.01)
        assert len(calls) == 2, "the second shard was not asked while the first one's rows were taken"
        rows = first.to_pylist() + [row for batch in batches for row in batch.to_pylist()]
    assert sorted(payloads(rows)) == sorted(produced) and len(calls) == 2


def test_with_enhanced_fan_out_a_busy_shard_is_probed_as_seldom_as_an_idle_one_and_no_page_is_held(
    kinesis_mock: LocalServer, tmp_path
) -> None:
    """The probes are such a query's only calls on the GetRecords quota every polling reader shares."""
    options = efo_options(kinesis_mock, "orders", tmp_path) | {"kinesis.getRecords.fetchIntervalMs": "200"}
    prober = reader(options | {"kinesis.probeIntervalMs": "1000"}).offsets.planner.prober
    assert (prober.interval_s, prober.busy_interval_s, prober.held_bytes) == (1.0, 1.0, 0)
