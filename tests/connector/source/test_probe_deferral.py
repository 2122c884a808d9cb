"""``source.probe_deferral.SteadyShards``: the steady shards a batch reads without a probe, and from when their reads
may call.

The rules under test (the module's docstrings, docs/source.md "How a micro-batch is planned and read" and
"Latency"): a shard whose probes and reads found records 10 times in a row (five batches) is steady; the trigger
plans it without a call when its second has room for the read's first call, which comes about 40 ms after the
trigger, or will have room within the window wait (60 ms shared); the read is told the wall-clock ms from which it
may call. Times are made up: no clock, no server.
"""

from __future__ import annotations

import pytest

from pyspark_aws_kinesis.source import probe_deferral
from pyspark_aws_kinesis.source.call_window import ShardCallWindows
from pyspark_aws_kinesis.source.probe_deferral import SteadyShards

KEY = "orders/shardId-000000000000"
OTHER = "orders/shardId-000000000001"
STEADY_ANSWERS = 10  # docs/source.md: "found records 10 times in a row (five batches)"
READ_LEAD_S = 0.04  # "the batch's read makes the call a probe would have made, about 40 ms later"
WAIT_S = 0.06  # a shared shard's window wait (probe_turns.SHARED_WINDOW_WAIT_S)
WINDOW = 1.01  # AWS's second and the 10 ms margin
WALL_MS = 1_700_000_000_000


def steady(shards: SteadyShards, key: str, answers: int = STEADY_ANSWERS) -> None:
    for _ in range(answers):
        shards.heard(key, True)


def full_second(windows: ShardCallWindows, key: str, first: float) -> None:
    """4 calls 200 ms apart from ``first``: the query's share of the shard's second."""
    for i in range(4):
        at = first + i * 0.2
        windows.called(key, at, round(at * 1000))


def test_ten_answers_with_records_in_a_row_make_a_shard_steady() -> None:
    shards = SteadyShards(ShardCallWindows(4), WAIT_S)
    steady(shards, KEY, STEADY_ANSWERS - 1)
    assert shards.read_starts([KEY], 50.0, WALL_MS) == {}
    shards.heard(KEY, True)
    assert shards.read_starts([KEY], 50.0, WALL_MS) == {KEY: WALL_MS}  # room now: the read may call at once


def test_one_answer_without_records_starts_the_count_again() -> None:
    shards = SteadyShards(ShardCallWindows(4), WAIT_S)
    steady(shards, KEY, STEADY_ANSWERS - 1)
    shards.heard(KEY, False)  # the producer paused
    steady(shards, KEY, STEADY_ANSWERS - 1)
    assert shards.read_starts([KEY], 50.0, WALL_MS) == {}
    shards.heard(KEY, True)
    assert KEY in shards.read_starts([KEY], 50.0, WALL_MS)


def test_a_steady_shard_stops_being_steady_when_a_read_finds_nothing() -> None:
    """When the producer stops, the deferred read finds nothing, and the shard is probed again."""
    shards = SteadyShards(ShardCallWindows(4), WAIT_S)
    steady(shards, KEY, 30)
    shards.heard(KEY, False)
    assert shards.read_starts([KEY], 50.0, WALL_MS) == {}


def test_only_the_shards_asked_about_are_chosen() -> None:
    shards = SteadyShards(ShardCallWindows(4), WAIT_S)
    steady(shards, KEY)
    steady(shards, OTHER)
    assert shards.read_starts([OTHER], 50.0, WALL_MS) == {OTHER: WALL_MS}
    assert shards.read_starts([], 50.0, WALL_MS) == {}


def test_a_read_that_would_wait_briefly_for_room_is_planned_with_when_it_may_call() -> None:
    windows = ShardCallWindows(4)
    shards = SteadyShards(windows, WAIT_S)
    steady(shards, KEY)
    full_second(windows, KEY, 10.0)
    now = 10.9505
    # room at 10.0 + 1.01 s and a ms = 11.011: 60.5 ms from now; the read calls 40 ms from now, then waits 20.5 ms
    assert (10.0 + WINDOW + 0.001 - now) * 1000 == pytest.approx(60.5)
    assert shards.read_starts([KEY], now, WALL_MS) == {KEY: WALL_MS + 61}  # whole ms, rounded up


def test_a_read_that_would_wait_longer_than_the_window_wait_is_left_to_a_probe() -> None:
    windows = ShardCallWindows(4)
    shards = SteadyShards(windows, WAIT_S)
    steady(shards, KEY)
    full_second(windows, KEY, 10.0)
    # room 111 ms from now: the read, 40 ms from now, would wait 71 ms > 60 ms
    assert shards.read_starts([KEY], 10.9, WALL_MS) == {}


def test_the_wait_is_counted_from_the_reads_first_call_not_from_the_trigger() -> None:
    """Room 100 ms away: 60 ms after the read's first call (40 ms from now), just within the window wait."""
    windows = ShardCallWindows(4)
    shards = SteadyShards(windows, WAIT_S)
    steady(shards, KEY)
    full_second(windows, KEY, 10.0)
    now = 10.0 + WINDOW + 0.001 - (READ_LEAD_S + WAIT_S) + 0.0005  # room 99.5 ms from now
    assert KEY in shards.read_starts([KEY], now, WALL_MS)


def test_the_ms_from_which_a_read_may_call_is_rounded_up() -> None:
    windows = ShardCallWindows(4)
    shards = SteadyShards(windows, WAIT_S)
    steady(shards, KEY)
    full_second(windows, KEY, 10.0)
    now = 10.9605  # room in 50.5 ms: a read told 50 ms would call early
    assert shards.read_starts([KEY], now, WALL_MS) == {KEY: WALL_MS + 51}


def test_forget_drops_the_counts_of_shards_no_longer_tracked() -> None:
    shards = SteadyShards(ShardCallWindows(4), WAIT_S)
    steady(shards, KEY)
    steady(shards, OTHER)
    shards.forget({OTHER})
    assert shards.read_starts([KEY, OTHER], 50.0, WALL_MS) == {OTHER: WALL_MS}


@pytest.mark.parametrize(("name", "value"), [("STEADY_ANSWERS", STEADY_ANSWERS), ("READ_LEAD_S", READ_LEAD_S)])
def test_the_constants_are_the_documented_ones(name: str, value: float) -> None:
    assert getattr(probe_deferral, name) == value


def test_a_steady_shard_still_paying_back_its_last_answer_is_read_without_a_probe_once_it_has_paid() -> None:
    """The last read's answer of 0.5 MiB started 50 ms ago is paid back in 200 ms: longer than the window wait,
    but a probe would have to wait as long; the read is planned at once and told to call when it is paid back."""
    windows = ShardCallWindows(4)
    shards = SteadyShards(windows, WAIT_S)
    steady(shards, KEY)
    windows.called(KEY, 49.95, round(49.95 * 1000))
    windows.answered(KEY, 49.95, 49.99, 512 * 1024)  # 0.25 s at 2 MiB/s from the call's start
    assert shards.read_starts([KEY], 50.0, WALL_MS) == pytest.approx({KEY: WALL_MS + 201}, abs=1)
