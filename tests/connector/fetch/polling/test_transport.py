"""The GetRecords transport (``pyspark_aws_kinesis.fetch.polling.transport``) over kinesalite, without Spark.

Pacing: successive calls on one shard start at least ``kinesis.getRecords.fetchIntervalMs`` apart (Kinesis allows
5 per second per shard), and the time a call itself took counts toward that interval. The clock is simulated (no
timing assertions): each GetRecords advances it by a chosen duration, the transport's pauses by what they sleep.

Read-ahead: the next GetRecords starts while the caller still holds the previous page, only when more is wanted
and more is there; a page asked ahead that the range does not need is dropped without losing or repeating a
record. Behind the quota proxy: test_transport_quotas.py."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from localaws import LocalServer
from localaws.streams import put_records
from pyspark_aws_kinesis.clock import now_ms
from pyspark_aws_kinesis.fetch.decode import ShardContext
from pyspark_aws_kinesis.fetch.polling.pacing import CallPacer
from pyspark_aws_kinesis.fetch.polling.settings import PollingSettings
from pyspark_aws_kinesis.fetch.polling.transport import GetRecordsTransport
from pyspark_aws_kinesis.fetch.range import FetchLimits
from pyspark_aws_kinesis.fetch.reads import STOP_CAUGHT_UP, STOP_END, STOP_LIMIT
from pyspark_aws_kinesis.positions import TRIM_HORIZON, Position
from pyspark_aws_kinesis.retry import RetryPolicy
from pyspark_aws_kinesis.shards import list_shards
from tests.connector.fetch.polling.polling_util import SimulatedClock, _read_range, _reader_client, _shard_with


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


def test_a_reads_calls_keep_the_querys_least_gap_beyond_the_fetch_interval(
    kinesalite: LocalServer, lite_stream
) -> None:
    """``PollingSettings.min_call_gap_s`` (shard_calls: 4 calls in any 1.01 s on a shared shard): a read that cannot
    see the driver's count starts its calls that far apart, though the fetch interval is shorter."""
    stream = lite_stream(shards=1)
    kinesis = kinesalite.client("kinesis")
    put_records(kinesis, stream, [(f"k{i}".encode(), f"k{i}") for i in range(7)])
    shard = list_shards(kinesis, stream)[0]
    clock = SimulatedClock()
    calls = TimedCalls(_reader_client(kinesalite), clock, 0.01)
    context = ShardContext(stream, shard.shard_id, shard.starting_hash_key, shard.ending_hash_key)
    settings = PollingSettings(3, 0.2, min_call_gap_s=0.2525)
    transport = GetRecordsTransport(calls, context, RetryPolicy(), settings)
    transport.pacer.clock, transport.pacer.sleep = clock, clock.sleep

    rows = 0
    for page in transport.pages(Position(TRIM_HORIZON), lambda: None):
        rows += len(page)
        if rows == 7:
            break
    assert len(calls.starts) == 3  # 3 + 3 + 1 records
    gaps = [later - earlier for earlier, later in zip(calls.starts, calls.starts[1:], strict=False)]
    assert all(gap >= 0.2525 - 1e-9 for gap in gaps), gaps


def test_a_read_ahead_call_still_waiting_when_its_read_ends_is_never_made(kinesalite: LocalServer, lite_stream) -> None:
    """The driver counts a shard's calls from the read's result (``call_starts_ms``): a read-ahead call made after
    the read ended would be one it never hears of, a 5th in some second beside another reader."""
    stream = lite_stream(shards=1)
    kinesis = kinesalite.client("kinesis")
    put_records(kinesis, stream, [(f"k{i}".encode(), f"k{i}") for i in range(7)])
    shard = list_shards(kinesis, stream)[0]
    calls = CountedCalls(_reader_client(kinesalite))
    context = ShardContext(stream, shard.shard_id, shard.starting_hash_key, shard.ending_hash_key)
    transport = GetRecordsTransport(calls, context, RetryPolicy(), PollingSettings(3, 1.5))
    pages = transport.pages(Position(TRIM_HORIZON), lambda: None)
    assert len(next(pages)) == 3  # more wait behind: the next page is asked ahead, 1.5 s after the first call
    pages.close()  # the read is over before the interval has passed
    time.sleep(2.0)
    assert calls.started == len(transport.call_starts_ms) == 1
