"""``source.probe_turns``: when each shard's next probe is due (``ProbeTurns``, ``ShardTurn``, ``backed_off``).

The rules under test come from the module's docstrings and docs/source.md ("How a micro-batch is planned and read",
"What the source costs a shard", "Latency"), with the default ``kinesis.probeIntervalMs`` (1 s) and
``kinesis.getRecords.fetchIntervalMs`` (200 ms) unless a test says otherwise:

- an idle shard is asked once a probe interval, at its own turn of it: a stream's shards take evenly spread turns,
  0.5 to 1.5 intervals apart;
- a busy shard is asked once 7/8 of the fetch interval (at least 200 ms) passed, while fewer than 4 of the query's
  calls on it started in the last second (5 when the probe interval is 200 ms or less): 4 triggers of 5 at 200 ms;
- a shard that just went quiet is asked after 350 ms, 700 ms, then every second;
- a refused shard waits its backoff (doubling, at least 1 s, at most 8 intervals);
- the first records on a stream that had none wake its other idle shards at once, each at most once an interval.

The schedule is driven here like ``probe.ShardProber`` drives it, on made-up monotonic times (no clock, no server).
Trigger grids are powers of two (1/32 s) where exact turns matter, so that the arithmetic is exact.
"""

from __future__ import annotations

import itertools
import math

import pytest

from pyspark_aws_kinesis.source import probe_turns
from pyspark_aws_kinesis.source.probe_answers import Found, ProbeResult
from pyspark_aws_kinesis.source.probe_turns import ProbeTurns, ShardTurn, backed_off

INTERVAL = 1.0  # kinesis.probeIntervalMs default
FETCH = 0.2  # kinesis.getRecords.fetchIntervalMs default
BUSY_GAP = 7 / 8 * FETCH  # a busy shard's calls at least 7/8 of the fetch interval apart: 175 ms
WINDOW = 1.01  # AWS's sliding second and the query's 10 ms margin
NOTHING = ProbeResult(Found.NOTHING, 0)
DATA = ProbeResult(Found.DATA, 1000)
ORDERS = [f"orders/shardId-00000000000{i}" for i in range(4)]
RETURNS = "returns/shardId-000000000000"


def wall(at: float) -> int:
    return round(at * 1000)


def ask(turns: ProbeTurns, key: str, state: ShardTurn, now: float, found: bool) -> None:
    """What the prober does when it asks a shard: one call in the shard's second, the answer kept."""
    turns.windows.called(key, now, wall(now))
    state.result = DATA if found else NOTHING
    state.probed_at = now
    state.heard(found)


def trigger(turns: ProbeTurns, states: dict[str, ShardTurn], now: float) -> tuple[list[str], float]:
    """One trigger as ``ShardProber.probe`` runs it: the due shards, after a short wait for room if one is worth it."""
    due = turns.due(states, now)
    wait = turns.room_wait(states, due, now)
    if wait > 0:
        now += wait
        due = turns.due(states, now)
    return due, now


def run(
    turns: ProbeTurns, states: dict[str, ShardTurn], until: float, step: float, found: bool = False, start: float = 0.0
) -> dict[str, list[float]]:
    """Triggers every ``step`` from ``start`` to ``until``; each shard asked answers ``found``. Returns ask times."""
    turns.spread(states)
    asks: dict[str, list[float]] = {key: [] for key in states}
    for i in range(round((until - start) / step) + 1):
        due, at = trigger(turns, states, start + i * step)
        for key in due:
            ask(turns, key, states[key], at, found)
            asks[key].append(at)
    return asks


def gaps(times: list[float]) -> list[float]:
    return [later - earlier for earlier, later in itertools.pairwise(times)]


# --- the options' translation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fetch_s", "busy_s"),
    [
        (0.2, 0.175),  # 7/8 of the fetch interval
        (0.4, 0.35),
        (0.1, 0.175),  # never closer than AWS's pace for 5 calls a second (200 ms)
        (2.0, INTERVAL),  # never seldomer than an idle shard
        (None, INTERVAL),  # enhanced fan-out: a busy shard at the probe interval
    ],
)
def test_a_busy_shards_gap_is_seven_eighths_of_the_fetch_interval(fetch_s: float | None, busy_s: float) -> None:
    assert ProbeTurns(INTERVAL, fetch_s).busy_interval_s == pytest.approx(busy_s)


@pytest.mark.parametrize(
    ("interval_s", "calls_per_s", "window_wait_s"),
    [
        (1.0, 4, 0.06),  # one of the shard's 5 calls a second left to another reader; waits up to 60 ms for room
        (0.5, 4, 0.06),
        (0.2, 5, 0.03),  # 200 ms or less says the query reads the stream alone: all 5, waits up to 30 ms
        (0.1, None, 0.03),  # below AWS's pace: not counted (whoever sets it takes the refusals)
    ],
)
def test_the_share_of_a_shards_calls_follows_the_probe_interval(
    interval_s: float, calls_per_s: int | None, window_wait_s: float
) -> None:
    turns = ProbeTurns(interval_s, FETCH)
    assert turns.windows.calls_per_s == calls_per_s
    assert turns.window_wait_s == window_wait_s


# --- a shard's own state --------------------------------------------------------------------------------------


def test_a_shard_turns_busy_on_records_and_counts_quiet_answers_since() -> None:
    state = ShardTurn()
    state.heard(False)
    assert (state.busy, state.quiet) == (False, 0)  # never busy: plain idle, not "quiet since busy"
    state.heard(True)
    assert (state.busy, state.quiet) == (True, 0)
    state.heard(False)
    assert (state.busy, state.quiet) == (False, 1)
    state.heard(False)
    assert (state.busy, state.quiet) == (False, 2)
    state.heard(True)
    assert (state.busy, state.quiet) == (True, 0)


@pytest.mark.parametrize(
    ("interval_s", "waits"),
    [
        (1.0, [2.0, 4.0, 8.0, 8.0]),  # doubling from the interval, at most 8 intervals
        (0.2, [1.0, 1.6, 1.6]),  # never under 1 s (the shard's window has passed by then), at most 8 intervals
        (0.1, [1.0, 1.0]),  # 8 intervals under 1 s: the 1 s floor wins
    ],
)
def test_a_refused_shard_backs_off_doubling_between_one_second_and_eight_intervals(
    interval_s: float, waits: list[float]
) -> None:
    previous, seen = 0.0, []
    for _ in waits:
        previous = backed_off(previous, interval_s)
        seen.append(previous)
    assert seen == pytest.approx(waits)


# --- who is due -------------------------------------------------------------------------------------------------


def test_a_shard_never_asked_at_its_position_is_due_at_once() -> None:
    turns = ProbeTurns(INTERVAL, FETCH)
    turns.spread(ORDERS)
    assert turns.due({ORDERS[0]: ShardTurn(since=5.0)}, 5.0) == [ORDERS[0]]


def test_the_shards_waiting_longest_come_first() -> None:
    turns = ProbeTurns(INTERVAL, FETCH)
    states = {
        ORDERS[0]: ShardTurn(result=DATA, probed_at=7.0, busy=True),
        ORDERS[1]: ShardTurn(since=5.0),  # never asked at its position: waiting since it got there
        ORDERS[2]: ShardTurn(result=DATA, probed_at=3.0, busy=True),
        ORDERS[3]: ShardTurn(result=DATA, probed_at=3.0, busy=True),  # a tie goes by key
    }
    turns.spread(states)
    assert turns.due(states, 20.0) == [ORDERS[2], ORDERS[3], ORDERS[1], ORDERS[0]]


def test_a_busy_shard_is_due_seven_eighths_of_the_fetch_interval_after_its_last_call() -> None:
    turns = ProbeTurns(INTERVAL, FETCH)
    states = {ORDERS[0]: ShardTurn(result=DATA, probed_at=10.0, busy=True)}
    turns.spread(states)
    assert turns.due(states, 10.0 + BUSY_GAP - 0.005) == []
    assert turns.due(states, 10.0 + BUSY_GAP + 0.005) == [ORDERS[0]]


def test_a_shard_that_went_quiet_is_asked_after_350_then_700_ms_then_every_second() -> None:
    """docs/source.md: "a shard that was busy a moment ago is asked again after 350 ms, then 700 ms, then every
    second"."""
    turns = ProbeTurns(INTERVAL, FETCH)
    key = ORDERS[0]
    state = ShardTurn(result=DATA, probed_at=9.8, busy=True)
    states = {key: state}
    turns.spread(states)
    ask(turns, key, state, 10.0, found=False)  # the first probe that finds nothing
    assert turns.due(states, 10.34) == []
    assert turns.due(states, 10.36) == [key]
    ask(turns, key, state, 10.36, found=False)
    assert turns.due(states, 11.05) == []
    assert turns.due(states, 11.07) == [key]
    ask(turns, key, state, 11.07, found=False)
    asked = run(turns, states, until=20.0, step=1 / 32, start=11.1)[key]
    assert all(gap == pytest.approx(INTERVAL) for gap in gaps(asked)), asked  # idle: once a second


def test_a_refused_shard_waits_out_its_backoff_before_its_turn_comes_again() -> None:
    turns = ProbeTurns(INTERVAL, FETCH)
    key = ORDERS[0]
    states = {key: ShardTurn(result=NOTHING, probed_at=10.0, backoff_s=2.0)}
    turns.spread([key])
    assert turns.due(states, 11.9) == []  # its idle turn came long ago
    assert turns.due(states, 12.01) == [key]


def test_a_refused_first_probe_is_not_asked_again_at_once() -> None:
    turns = ProbeTurns(INTERVAL, FETCH)
    key = ORDERS[0]
    states = {key: ShardTurn(result=None, probed_at=10.0, backoff_s=2.0)}  # refused before any answer
    turns.spread([key])
    assert turns.due(states, 10.5) == []
    assert turns.due(states, 12.01) == [key]


def test_a_shard_read_to_its_end_is_never_asked_again() -> None:
    turns = ProbeTurns(INTERVAL, FETCH)
    key = ORDERS[0]
    states = {key: ShardTurn(result=ProbeResult(Found.SHARD_END), probed_at=10.0)}
    turns.spread([key])
    assert run(turns, states, until=20.0, step=0.25, start=10.25)[key] == []


# --- idle shards take turns -------------------------------------------------------------------------------------


def test_a_streams_idle_shards_take_evenly_spread_turns_once_an_interval() -> None:
    turns = ProbeTurns(INTERVAL, FETCH)
    states = {key: ShardTurn(since=0.0) for key in ORDERS}
    asks = run(turns, states, until=10.0, step=1 / 32)
    assert all(times[0] == 0.0 for times in asks.values())  # never asked: all at the first trigger
    later = sorted(at for times in asks.values() for at in times[1:])
    assert len(later) == len(set(later))  # never two of the stream's shards at one trigger
    assert gaps(later) == pytest.approx([INTERVAL / len(ORDERS)] * (len(later) - 1))  # a quarter second apart
    for key, times in asks.items():
        assert 0.5 <= times[1] - times[0] <= 1.5, (key, times)
        assert gaps(times[1:]) == pytest.approx([INTERVAL] * (len(times) - 2)), (key, times)
        assert len(times) in (10, 11), (key, times)  # once a second over 10 s


def test_each_stream_spreads_its_own_shards() -> None:
    turns = ProbeTurns(INTERVAL, FETCH)
    two = ORDERS[:2]
    states = {key: ShardTurn(since=0.0) for key in [*two, RETURNS]}
    asks = run(turns, states, until=6.0, step=1 / 32)
    orders = sorted(at for key in two for at in asks[key][1:])
    assert gaps(orders) == pytest.approx([INTERVAL / 2] * (len(orders) - 1))  # two shards: half a second apart
    assert gaps(asks[RETURNS][1:]) == pytest.approx([INTERVAL] * (len(asks[RETURNS]) - 2))


def test_turns_are_spread_again_when_the_shards_change() -> None:
    turns = ProbeTurns(INTERVAL, FETCH)
    states = {key: ShardTurn(since=0.0) for key in ORDERS[:2]}
    run(turns, states, until=3.0, step=1 / 32)
    states.update({key: ShardTurn(since=3.0) for key in ORDERS[2:]})  # a split: two more shards
    asks = run(turns, states, until=10.0, step=1 / 32, start=3.0 + 1 / 32)
    settled = sorted(at for times in asks.values() for at in times if at >= 6.0)
    assert gaps(settled) == pytest.approx([INTERVAL / 4] * (len(settled) - 1))


@pytest.mark.parametrize("phase_index", range(4))
def test_an_idle_shard_is_asked_half_to_one_and_a_half_intervals_after_any_probe(phase_index: int) -> None:
    """Wherever its last probe fell (at its turn, early, or out of turn when woken), an idle shard's next probe comes
    0.5 to 1.5 intervals later: never two within half an interval, one an interval over time."""
    turns = ProbeTurns(INTERVAL, FETCH)
    turns.spread(ORDERS)
    key, step = ORDERS[phase_index], 1 / 64
    for offset in range(64):
        probed_at = 10.0 + offset * step
        states = {key: ShardTurn(result=NOTHING, probed_at=probed_at)}
        next_at = next(at for i in range(1, 200) if turns.due(states, at := probed_at + i * step))
        assert 0.5 <= next_at - probed_at <= 1.5, (probed_at, next_at)


# --- busy shards and their second ----------------------------------------------------------------------------


def test_a_busy_shard_at_a_200_ms_trigger_is_asked_4_triggers_of_5_never_5_calls_in_a_second() -> None:
    turns = ProbeTurns(INTERVAL, FETCH)
    key = ORDERS[0]
    states = {key: ShardTurn(since=0.0)}
    asked = run(turns, states, until=10.0 - 0.2, step=0.2, found=True)[key]  # 50 triggers
    assert 39 <= len(asked) <= 40  # 4 of every 5 (the first second may give one more or less)
    for i, start in enumerate(asked):
        in_window = [at for at in asked[i:] if at < start + WINDOW]
        assert len(in_window) <= 4, (start, in_window)


def test_a_query_reading_alone_asks_a_busy_shard_at_every_200_ms_trigger() -> None:
    turns = ProbeTurns(0.2, FETCH)  # the low-latency recipe: kinesis.probeIntervalMs=200
    key = ORDERS[0]
    states = {key: ShardTurn(since=0.0)}
    asked = run(turns, states, until=10.0 - 0.2, step=0.2, found=True)[key]
    for i, start in enumerate(asked):
        assert len([at for at in asked[i:] if at < start + WINDOW]) <= 5
    assert len(asked) >= 45  # the shard's whole budget, bar the triggers a 10 ms margin pushes out


def test_a_busy_shard_due_but_for_its_second_is_waited_for_only_briefly() -> None:
    turns = ProbeTurns(INTERVAL, FETCH)
    key = ORDERS[0]
    state = ShardTurn(since=0.0)
    states = {key: state}
    turns.spread(states)
    for at in (10.0, 10.2, 10.4, 10.6):
        ask(turns, key, state, at, found=True)
    # at 10.8 the 4 calls of the last second leave no room: room comes at 11.011 (10.0 + 1.01 s and a ms)
    assert turns.due(states, 10.8) == []
    assert turns.room_wait(states, [], 10.8) == 0.0  # 211 ms: more than the 60 ms worth waiting
    assert turns.room_wait(states, [], 10.96) == pytest.approx(11.011 - 10.96)
    assert turns.due(states, 11.012) == [key]
    assert turns.room_wait(states, [key], 11.012) == 0.0


def test_only_busy_shards_are_waited_for() -> None:
    turns = ProbeTurns(INTERVAL, FETCH)
    key = ORDERS[0]
    state = ShardTurn(since=0.0)
    states = {key: state}
    turns.spread(states)
    for at in (10.0, 10.2, 10.4, 10.6):
        ask(turns, key, state, at, found=False)
    assert not state.busy
    assert turns.room_wait(states, [], 10.99) == 0.0


# --- waking a stream's idle shards --------------------------------------------------------------------------


def idle_stream(turns: ProbeTurns) -> dict[str, ShardTurn]:
    states = {key: ShardTurn(result=NOTHING, probed_at=10.0) for key in [*ORDERS, RETURNS]}
    turns.spread(states)
    return states


def test_the_first_records_on_a_quiet_stream_wake_its_other_idle_shards() -> None:
    turns = ProbeTurns(INTERVAL, FETCH)
    states = idle_stream(turns)
    busy_before = turns.busy_streams(states)
    assert busy_before == set()
    ask(turns, ORDERS[0], states[ORDERS[0]], 10.3, found=True)
    assert turns.busy_streams(states) == {"orders"}
    woken = turns.woken(states, [ORDERS[0]], busy_before, 10.3, most=100)
    assert woken == ORDERS[1:]  # not the shard asked, not another stream's
    assert all(states[key].woken_at == 10.3 for key in woken)


def test_a_shard_is_woken_at_most_once_an_interval() -> None:
    turns = ProbeTurns(INTERVAL, FETCH)
    states = idle_stream(turns)
    ask(turns, ORDERS[0], states[ORDERS[0]], 10.3, found=True)
    assert turns.woken(states, [ORDERS[0]], set(), 10.3, most=100) == ORDERS[1:]
    assert turns.woken(states, [ORDERS[0]], set(), 10.3 + 0.9 * INTERVAL, most=100) == []
    assert turns.woken(states, [ORDERS[0]], set(), 10.3 + INTERVAL, most=100) == ORDERS[1:]


def test_no_wake_when_the_stream_already_had_records_or_the_probe_found_none() -> None:
    turns = ProbeTurns(INTERVAL, FETCH)
    states = idle_stream(turns)
    ask(turns, ORDERS[0], states[ORDERS[0]], 10.3, found=False)
    assert turns.woken(states, [ORDERS[0]], set(), 10.3, most=100) == []
    ask(turns, ORDERS[0], states[ORDERS[0]], 10.6, found=True)
    assert turns.woken(states, [ORDERS[0]], {"orders"}, 10.6, most=100) == []


def test_only_idle_shards_with_an_empty_answer_and_room_are_woken() -> None:
    turns = ProbeTurns(INTERVAL, FETCH)
    states = idle_stream(turns)
    extra = "orders/shardId-000000000004"
    states[ORDERS[1]].backoff_s = 2.0  # refused: waits out its backoff
    states[ORDERS[2]].busy = True  # busy: asked at its own pace
    states[extra] = ShardTurn(result=ProbeResult(Found.SHARD_END), probed_at=10.0)  # read to its end
    turns.spread(states)
    for at in (9.5, 9.6, 9.7, 9.8):  # ORDERS[3]'s second is full
        turns.windows.called(ORDERS[3], at, wall(at))
    ask(turns, ORDERS[0], states[ORDERS[0]], 10.3, found=True)
    assert turns.woken(states, [ORDERS[0]], set(), 10.3, most=100) == []
    assert turns.woken(states, [ORDERS[0]], set(), 10.52, most=100) == [ORDERS[3]]  # its second has room now


def test_past_the_most_asked_the_rest_are_woken_next_time() -> None:
    turns = ProbeTurns(INTERVAL, FETCH)
    states = idle_stream(turns)
    ask(turns, ORDERS[0], states[ORDERS[0]], 10.3, found=True)
    assert turns.woken(states, [ORDERS[0]], set(), 10.3, most=1) == [ORDERS[1]]
    assert states[ORDERS[2]].woken_at == -math.inf  # not counted as woken
    assert turns.woken(states, [ORDERS[0]], set(), 10.35, most=5) == ORDERS[2:]


def test_the_defaults_match_the_docs() -> None:
    """docs/source.md: refused probes back off up to 8 intervals; busy calls 7/8 of the fetch interval apart; waits for
    room of 60 ms shared, 30 ms alone (the calls a second kept: test_shard_calls)."""
    assert probe_turns.MAX_BACKOFF_INTERVALS == 8
    assert probe_turns.BUSY_GAP_SHARE == 7 / 8
    assert (probe_turns.SHARED_WINDOW_WAIT_S, probe_turns.ALONE_WINDOW_WAIT_S) == (0.06, 0.03)
