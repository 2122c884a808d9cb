"""``source.call_window.ShardCallWindows``: the query's GetRecords calls on each shard within AWS's sliding second.

The rules under test (the module's docstrings, docs/source.md "What the source costs a shard"): AWS admits 5
GetRecords a second per shard, counted over a sliding second from when each call reaches it; the query counts its
own calls over that second and 10 ms more, keeps to ``calls_per_s`` of them (4 shared, 5 alone, None: no limit), and
forgets calls that can never count again. Times are made up (monotonic seconds): no clock, no server.
"""

from __future__ import annotations

import pytest

from pyspark_aws_kinesis.source.call_window import ShardCallWindows

KEY = "orders/shardId-000000000000"
OTHER = "orders/shardId-000000000001"
SECOND = 1.0  # AWS's sliding window
MARGIN = 0.010  # the query counts each call 10 ms longer (docs/source.md)
ONE_MS = 0.001  # room_in answers "seconds (and a ms)"


def wall(at: float) -> int:
    """A made-up wall-clock ms for a monotonic time (calls are told apart by it)."""
    return round(at * 1000)


def calls(windows: ShardCallWindows, key: str, *starts: float) -> None:
    for at in starts:
        windows.called(key, at, wall(at))


def test_a_call_counts_for_a_second_and_the_margin_then_no_more() -> None:
    windows = ShardCallWindows(4)
    calls(windows, KEY, 100.0)
    assert windows.count(KEY, 100.0) == 1
    assert windows.count(KEY, 100.0 + SECOND) == 1  # AWS's second is over, the margin is not
    assert windows.count(KEY, 100.0 + SECOND + MARGIN / 2) == 1
    assert windows.count(KEY, 100.0 + SECOND + 2 * MARGIN) == 0


def test_each_shard_has_a_window_of_its_own() -> None:
    windows = ShardCallWindows(4)
    calls(windows, KEY, 1.0, 1.2, 1.4, 1.6)
    assert windows.count(OTHER, 1.7) == 0
    assert windows.room_in(OTHER, 1.7) == 0.0
    assert windows.count(KEY, 1.7) == 4


def test_fewer_calls_than_the_share_leave_room_now() -> None:
    windows = ShardCallWindows(4)
    calls(windows, KEY, 10.0, 10.2, 10.4)
    assert windows.room_in(KEY, 10.5) == 0.0


def test_a_full_second_has_room_when_its_oldest_call_leaves_it() -> None:
    windows = ShardCallWindows(4)
    calls(windows, KEY, 10.0, 10.2, 10.4, 10.6)
    now = 10.7
    wait = windows.room_in(KEY, now)
    # the call at 10.0 stops counting once a second and the margin have passed: at 11.01, and a ms
    assert wait == pytest.approx(10.0 + SECOND + MARGIN + ONE_MS - now)
    assert windows.room_in(KEY, now + wait - 2 * ONE_MS) > 0  # not a moment earlier
    assert windows.count(KEY, now + wait) == 3
    assert windows.room_in(KEY, now + wait) == 0.0


def test_more_calls_than_the_share_wait_for_all_but_the_share_to_leave() -> None:
    """A read's calls heard of can put more than the share in a second: room comes when fewer than 4 are left."""
    windows = ShardCallWindows(4)
    calls(windows, KEY, 20.0, 20.1, 20.2, 20.3, 20.4)
    now = 20.5
    assert windows.room_in(KEY, now) == pytest.approx(20.1 + SECOND + MARGIN + ONE_MS - now)


def test_a_query_reading_alone_may_make_all_five_calls() -> None:
    windows = ShardCallWindows(5)
    calls(windows, KEY, 1.0, 1.2, 1.4, 1.6)
    assert windows.room_in(KEY, 1.7) == 0.0
    calls(windows, KEY, 1.8)
    assert windows.room_in(KEY, 1.9) == pytest.approx(1.0 + SECOND + MARGIN + ONE_MS - 1.9)


def test_no_limit_always_has_room_but_still_counts() -> None:
    windows = ShardCallWindows(None)
    calls(windows, KEY, *(5.0 + i / 100 for i in range(10)))
    assert windows.room_in(KEY, 5.1) == 0.0
    assert windows.count(KEY, 5.1) == 10


def test_a_read_call_that_was_the_probes_call_is_counted_once() -> None:
    """A read whose first page was a probe's answer names the probe's call (same wall-clock ms)."""
    windows = ShardCallWindows(4)
    windows.called(KEY, 5.0, 5000)
    windows.heard(KEY, 5.0004, 5000)
    assert windows.count(KEY, 5.1) == 1
    windows.heard(KEY, 5.2, 5200)  # the read's own next call
    assert windows.count(KEY, 5.3) == 2
    windows.heard(OTHER, 5.0, 5000)  # the same ms on another shard is another call
    assert windows.count(OTHER, 5.1) == 1


def test_a_call_heard_of_late_counts_from_when_it_started() -> None:
    """A read's call reported after a later probe's: its room comes from its own (earlier) start."""
    windows = ShardCallWindows(2)
    calls(windows, KEY, 5.5)
    windows.heard(KEY, 5.0, wall(5.0))
    assert windows.count(KEY, 5.6) == 2
    assert windows.room_in(KEY, 5.6) == pytest.approx(5.0 + SECOND + MARGIN + ONE_MS - 5.6)
    assert windows.count(KEY, 5.0 + SECOND + 2 * MARGIN) == 1  # it left on time, behind the later call


def test_a_shard_only_heard_of_keeps_its_last_seconds_not_its_history() -> None:
    """A busy shard planned from its reads (its room never asked) holds the calls that may still count and a second
    more, not a minute of them."""
    windows = ShardCallWindows(4)
    starts = [i / 5 for i in range(300)]  # a call every 200 ms for a minute
    for at in starts:
        windows.heard(KEY, at, wall(at))
    newest = starts[-1]
    # kept: those less than the window and a second of slack (2.01 s) older than the newest: 11 calls 200 ms apart
    assert windows.held(KEY) == sum(1 for at in starts if at > newest - (SECOND + MARGIN + 1.0))
    assert windows.held(KEY) == 11


def test_counting_drops_the_calls_that_left_the_window() -> None:
    windows = ShardCallWindows(4)
    calls(windows, KEY, 1.0, 1.5)
    assert windows.count(KEY, 2.3) == 1
    assert windows.held(KEY) == 1
    assert windows.count(KEY, 60.0) == 0
    assert windows.held(KEY) == 0


def test_forget_drops_shards_no_longer_tracked() -> None:
    windows = ShardCallWindows(4)
    calls(windows, KEY, 1.0)
    calls(windows, OTHER, 1.0)
    windows.forget({OTHER})
    assert windows.held(KEY) == 0
    assert windows.held(OTHER) == 1


def test_the_querys_answers_leave_no_room_until_their_bytes_are_paid_back() -> None:
    """An answer of 3 MiB at 2 MiB/s: no call for 1.5 s after its call started (a probe would be refused while the
    shard owes more than a second's budget), whatever the calls in the second; a read's debt heard from elsewhere
    counts the same; a forgotten shard owes nothing."""
    windows = ShardCallWindows(4)
    calls(windows, KEY, 100.0)
    windows.answered(KEY, 100.0, 100.2, 3 * 1024 * 1024)
    assert windows.room_in(KEY, 100.2) == pytest.approx(1.3 + ONE_MS)
    assert windows.room_in(KEY, 101.5 + ONE_MS) == 0.0
    assert windows.room_in(OTHER, 100.2) == 0.0
    windows.paid_by(OTHER, 104.0)
    assert windows.room_in(OTHER, 103.0) == pytest.approx(1.0 + ONE_MS)
    windows.paid_by(OTHER, 102.0)  # an older debt does not shorten it
    assert windows.room_in(OTHER, 103.0) == pytest.approx(1.0 + ONE_MS)
    windows.forget({KEY})
    assert windows.room_in(OTHER, 103.0) == 0.0
