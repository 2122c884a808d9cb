"""The GetRecords transport over kinesalite, without Spark.

Pacing: successive calls on one shard start at least ``kinesis.getRecords.fetchIntervalMs`` apart (Kinesis allows
5 per second per shard), and the time a call itself took counts toward that interval. The clock is simulated (no
timing assertions): each GetRecords advances it by a chosen duration, the transport's pauses by what they sleep.

Read-ahead: the next GetRecords starts while the caller still holds the previous page, only when more is wanted
and more is there; a page asked ahead that the range does not need is dropped without losing or repeating a
record."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from source_util import client_settings

from localaws import LocalServer
from localaws.streams import put_records
from pyspark_aws_kinesis.aws.clients import kinesis_reader_client
from pyspark_aws_kinesis.clock import now_ms
from pyspark_aws_kinesis.fetch.decode import ShardContext
from pyspark_aws_kinesis.fetch.polling.memory import ShardMemory
from pyspark_aws_kinesis.fetch.polling.pacing import MAX_CHARGE_LAG_S, CallPacer
from pyspark_aws_kinesis.fetch.polling.settings import PollingSettings
from pyspark_aws_kinesis.fetch.polling.transport import GetRecordsTransport
from pyspark_aws_kinesis.fetch.range import FetchLimits, ShardRange, ShardTask
from pyspark_aws_kinesis.fetch.reads import STOP_CAUGHT_UP, STOP_END, STOP_LIMIT
from pyspark_aws_kinesis.positions import TRIM_HORIZON, Position
from pyspark_aws_kinesis.record_sizes import SHARD_READ_BYTES_PER_S
from pyspark_aws_kinesis.retry import RetryPolicy
from pyspark_aws_kinesis.shards import list_shards

INTERVAL_S = 0.2


class SimulatedClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class CountedCalls:
    """A real Kinesis client that counts its GetRecords calls as they start."""

    def __init__(self, kinesis: Any):
        self.kinesis = kinesis
        self.started = 0
        self.changed = threading.Condition()

    def get_records(self, **kwargs: Any) -> Any:
        with self.changed:
            self.started += 1
            self.changed.notify_all()
        return self.kinesis.get_records(**kwargs)

    def wait_for(self, calls: int, timeout_s: float = 30.0) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: self.started >= calls, timeout_s)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kinesis, name)


def _reader_client(server: LocalServer) -> Any:
    return kinesis_reader_client(client_settings(server))


def _shard_with(server: LocalServer, lite_stream, records: int) -> tuple[ShardContext, list[str]]:
    """A 1-shard stream holding ``records`` records; its context and the records' sequence numbers."""
    stream = lite_stream(shards=1)
    kinesis = server.client("kinesis")
    put = put_records(kinesis, stream, [(f"r{i}".encode(), f"k{i}") for i in range(records)])
    shard = list_shards(kinesis, stream)[0]
    return ShardContext(stream, shard.shard_id, shard.starting_hash_key, shard.ending_hash_key), [
        entry["SequenceNumber"] for entry in put
    ]


class TimedCalls:
    """A real Kinesis client whose GetRecords calls take ``call_s`` on the simulated clock; records call starts."""

    def __init__(self, kinesis: Any, clock: SimulatedClock, call_s: float):
        self.kinesis, self.clock, self.call_s = kinesis, clock, call_s
        self.starts: list[float] = []

    def get_records(self, **kwargs: Any) -> Any:
        self.starts.append(self.clock.now)
        answer = self.kinesis.get_records(**kwargs)
        self.clock.now += self.call_s
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kinesis, name)


def test_the_shard_memory_forgets_the_shard_read_longest_ago_beyond_its_bound() -> None:
    memory = ShardMemory(max_shards=3)
    first, second, third, child = (("s", f"shardId-{i}") for i in range(4))
    for paid_ms, shard in enumerate((first, second, third)):
        memory.learn(shard, records=10, nbytes=1000 * (paid_ms + 1), paid_ms=paid_ms)
    memory.called(first, 100)  # read again: now the one read last
    memory.learn(child, records=1, nbytes=50, paid_ms=4)  # a reshard's child: the one read longest ago goes
    assert len(memory) == 3
    assert (memory.size(second), memory.paid_ms(second), memory.called_ms(second)) == (None, None, None)
    assert (memory.size(first), memory.paid_ms(first), memory.called_ms(first)) == (100.0, 0, 100)
    assert (memory.size(third), memory.size(child)) == (300.0, 50.0)


def test_the_shard_memory_stays_bounded_over_reshards_and_keeps_the_shards_being_read() -> None:
    memory = ShardMemory(max_shards=20)
    for generation in range(100):  # 100 reshards of a 10-shard stream, each read for 3 batches
        shards = [("s", f"shardId-{generation:03d}-{i}") for i in range(10)]
        for batch in range(3):
            for shard in shards:
                memory.called(shard, generation * 10 + batch)
                memory.learn(shard, records=1, nbytes=100, paid_ms=generation * 10 + batch)
        assert len(memory) <= 20
        assert all(memory.paid_ms(shard) == generation * 10 + 2 for shard in shards)


def test_the_pacer_waits_only_what_is_left_of_the_interval() -> None:
    clock = SimulatedClock()
    pacer = CallPacer(INTERVAL_S, clock, clock.sleep)
    pacer.wait()  # the first call: nothing to wait for
    clock.now += 0.05  # that call took 50 ms
    pacer.wait()
    clock.now += 0.5  # this one took longer than the interval
    pacer.wait()
    assert clock.sleeps == [pytest.approx(0.15)]
    assert CallPacer(0.0, clock, clock.sleep).wait() is None and clock.sleeps == [pytest.approx(0.15)]


def test_an_answers_bytes_are_paid_back_from_its_calls_start_but_from_no_longer_than_a_lag_before_it() -> None:
    """Counted from the answer, each call on a busy shard also waited its own round trip (~3.8 calls a second where
    the bytes allow 4); counted from further back than ``MAX_CHARGE_LAG_S``, a slow call could put the shard in more
    debt than Kinesis tolerates (a second's budget) by the time of the next call."""
    clock = SimulatedClock()
    pacer = CallPacer(0.0, clock, clock.sleep)
    quarter = SHARD_READ_BYTES_PER_S // 4  # a quarter of a second's budget
    pacer.wait()
    clock.now += 0.1  # the call's round trip
    assert pacer.charge(quarter, pacer.last_start) == pytest.approx(0.15)  # paid back 250 ms after the start
    pacer.wait()
    assert clock.sleeps == [pytest.approx(0.15)]
    clock.now += 2.0  # a slow call: counted from MAX_CHARGE_LAG_S before its answer, not from its start
    assert pacer.charge(2 * quarter, pacer.last_start) == pytest.approx(0.5 - MAX_CHARGE_LAG_S)
    assert pacer.charge(quarter) == pytest.approx(0.25 + 0.5 - MAX_CHARGE_LAG_S)  # no start: from the answer


@pytest.mark.parametrize(("call_s", "expected_sleep_s"), [(0.05, 0.25), (0.4, None)])
def test_calls_on_a_shard_start_an_interval_apart_counting_the_calls_own_time(
    kinesalite: LocalServer, lite_stream, call_s: float, expected_sleep_s: float | None
) -> None:
    stream = lite_stream(shards=1)
    kinesis = kinesalite.client("kinesis")
    put_records(kinesis, stream, [(f"k{i}".encode(), f"k{i}") for i in range(7)])
    shard = list_shards(kinesis, stream)[0]
    interval_s = 0.3  # above a read's least interval while more records wait (polling.settings.MIN_BUSY_INTERVAL_S)
    clock = SimulatedClock()
    calls = TimedCalls(_reader_client(kinesalite), clock, call_s)
    context = ShardContext(stream, shard.shard_id, shard.starting_hash_key, shard.ending_hash_key)
    transport = GetRecordsTransport(calls, context, RetryPolicy(), PollingSettings(3, interval_s))
    transport.pacer = CallPacer(interval_s, clock, clock.sleep)

    rows = 0
    for page in transport.pages(Position(TRIM_HORIZON), lambda: None):
        rows += len(page)
        if rows == 7:
            break
    assert rows == 7 and len(calls.starts) == 3  # 3 + 3 + 1 records
    gaps = [later - earlier for earlier, later in zip(calls.starts, calls.starts[1:], strict=False)]
    assert all(gap >= interval_s - 1e-9 for gap in gaps), gaps  # never faster than Kinesis allows
    expected = [] if expected_sleep_s is None else [pytest.approx(expected_sleep_s)] * 2
    assert clock.sleeps == expected  # ... and no slower: the call's own time counts


@pytest.mark.parametrize(("ahead_ms", "waits"), [(5000, True), (-5000, False)])
def test_a_read_planned_without_a_probe_makes_no_call_before_the_shards_second_has_room(
    kinesalite: LocalServer, lite_stream, ahead_ms: int, waits: bool
) -> None:
    """``ShardTask.not_before_ms`` (the driver's wall clock): the first call waits for it, a time passed costs none."""
    stream = lite_stream(shards=1)
    shard = list_shards(kinesalite.client("kinesis"), stream)[0]
    clock = SimulatedClock()
    context = ShardContext(stream, shard.shard_id, shard.starting_hash_key, shard.ending_hash_key)
    transport = GetRecordsTransport(
        _reader_client(kinesalite), context, RetryPolicy(), PollingSettings(3, 0.2), not_before_ms=now_ms() + ahead_ms
    )
    transport.pacer = CallPacer(0.2, clock, clock.sleep)
    page = next(transport.pages(Position(TRIM_HORIZON), lambda: None))
    assert page.caught_up
    if waits:  # what was left of the 5 s when the read started (a real clock ran meanwhile, on a loaded machine)
        assert len(clock.sleeps) == 1 and 2.0 < clock.sleeps[0] <= 5.0
    else:
        assert clock.sleeps == []


def _read_range(
    transport: GetRecordsTransport,
    context: ShardContext,
    start: Position,
    on_slice: Callable[[list[str]], None] = lambda rows: None,
    **kwargs: Any,
):
    """The rows of one range read and its result; ``on_slice(rows so far)`` runs while the range holds a page."""
    task = ShardTask(context.stream_name, context.shard_id, context.starting_hash_key, context.ending_hash_key, start)
    limits = kwargs.pop("limits", FetchLimits())
    shard_range = ShardRange(task, limits, context, **kwargs)
    rows: list[str] = []
    for page, first, stop in shard_range.slices(transport):
        rows += page.sequences[first:stop]
        on_slice(rows)
    assert shard_range.result is not None
    return rows, shard_range.result


def test_the_next_call_is_under_way_while_the_caller_holds_a_page(kinesalite: LocalServer, lite_stream) -> None:
    context, sequences = _shard_with(kinesalite, lite_stream, 25)
    calls = CountedCalls(_reader_client(kinesalite))
    transport = GetRecordsTransport(calls, context, RetryPolicy(), PollingSettings(10, 0.0))
    pages = transport.pages(Position(TRIM_HORIZON), lambda: None)
    first = next(pages)
    assert len(first) == 10
    assert calls.wait_for(2), "no GetRecords ahead of the caller"  # before the caller asked for the second page
    rest: list[str] = []
    for page in pages:  # the transport goes on past the tip (the range stops there): stop at the tip page
        rest += page.sequences
        if page.at_tip:
            break
    pages.close()
    # ... and none past the tip: 10 + 10 + 5 (fewer than Limit: at the tip), then nothing more was asked.
    time.sleep(0.3)
    assert first.sequences + rest == sequences and calls.started == 3


def test_no_call_ahead_when_the_page_holds_all_the_range_wants(kinesalite: LocalServer, lite_stream) -> None:
    context, sequences = _shard_with(kinesalite, lite_stream, 25)
    calls = CountedCalls(_reader_client(kinesalite))
    transport = GetRecordsTransport(calls, context, RetryPolicy(), PollingSettings(10, 0.0))
    rows, result = _read_range(transport, context, Position(TRIM_HORIZON), limits=FetchLimits(max_records=12))
    time.sleep(0.3)
    assert rows == sequences[:12] and result.stop == STOP_LIMIT
    assert calls.started == 2  # 10, then the 2 still wanted (asked ahead with Limit 2), and no third


def test_a_page_asked_ahead_and_not_needed_is_dropped_without_a_gap(kinesalite: LocalServer, lite_stream) -> None:
    context, sequences = _shard_with(kinesalite, lite_stream, 25)
    calls = CountedCalls(_reader_client(kinesalite))
    transport = GetRecordsTransport(calls, context, RetryPolicy(), PollingSettings(10, 0.0))

    def third_page_asked(rows: list[str]) -> None:
        if len(rows) > 10:  # holding the second page: let the call ahead start before the range stops
            assert calls.wait_for(3), "the third page was not asked ahead"

    # A fixed end inside the second page (a replay's or a batch read's): the page after it is asked ahead, unused.
    rows, result = _read_range(transport, context, Position(TRIM_HORIZON), third_page_asked, until=(sequences[12], 0))
    assert rows == sequences[:13] and result.stop == STOP_END
    again = GetRecordsTransport(calls, context, RetryPolicy(), PollingSettings(10, 0.0))
    rest, result = _read_range(again, context, result.next_start())
    assert rest == sequences[13:] and result.stop == STOP_CAUGHT_UP
