"""Driver side: when each shard's next probe is due, from its last answer and the query's calls in its second.

Who calls it: ``probe.ShardProber``, which asks at each trigger which shards are due (``ProbeTurns.due``), whether to
wait a moment for room in a busy shard's second (``room_wait``), and, after its probes, which idle shards a
producer's first records wake (``woken``). An idle shard is asked once a probe interval at its own turn of it, a busy
one at the fetch pace within its share of the shard's 5 GetRecords a second, a refused one after a growing backoff:
the rules and their measurements are in docs/source.md ("How a micro-batch is planned and read", "Latency").
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..positions import split_shard_key
from ..retry import quota_backoff
from ..shard_calls import ALONE_PROBE_INTERVAL_S, query_calls_per_s
from .call_window import ShardCallWindows
from .probe_answers import Found, ProbeResult

MAX_BACKOFF_INTERVALS = 8  # a refused shard's probe interval doubles up to this many probe intervals
MIN_CALL_INTERVAL_S = 0.2  # AWS's pace for 5 calls a second: the least fetch interval the busy gap is taken from
# A busy shard's calls are at least this share of the fetch interval apart: a trigger a little early still asks.
BUSY_GAP_SHARE = 0.875
# How long a trigger waits at most for a busy shard's oldest call to leave its second (why: docs/source.md, Latency).
SHARED_WINDOW_WAIT_S = 0.06
ALONE_WINDOW_WAIT_S = 0.03


def backed_off(previous_s: float, interval_s: float) -> float:
    """A refused shard's next probe interval: ``quota_backoff`` from the longer of the last wait and the probe
    interval, at most ``MAX_BACKOFF_INTERVALS`` probe intervals."""
    return quota_backoff(max(previous_s, interval_s), MAX_BACKOFF_INTERVALS * interval_s)


@dataclass
class ShardTurn:
    """The schedule's part of a shard's state at its position: its last answer, and what decides its next turn."""

    result: ProbeResult | None = None  # the last answer at the position (a probe's, or a read's that ended at the tip)
    probed_at: float = 0.0  # when that answer was asked for (monotonic s)
    since: float = field(default_factory=time.monotonic)  # when the shard reached this position
    backoff_s: float = 0.0  # after refusals: the shard's own, longer interval (0: the schedule's)
    busy: bool = False  # the last probe or read found records: asked at the fetch pace
    quiet: int = 0  # answers in a row that found nothing since the shard was busy
    woken_at: float = -math.inf  # when a sibling's records last had it asked out of turn

    def heard(self, found: bool) -> None:
        """A probe or read of the shard found records, or not: busy, or one more quiet answer since it was."""
        self.quiet = 0 if found else self.quiet + 1 if self.busy or self.quiet else 0
        self.busy = found


class ProbeTurns:
    """Which shards a trigger asks: idle ones at their turn of the probe interval, busy ones at the fetch pace with
    room in their second, and the idle siblings of a shard that just started getting records."""

    def __init__(self, interval_s: float, busy_interval_s: float | None):
        self.interval_s = interval_s
        # busy_interval_s None (enhanced fan-out): a busy shard is asked as seldom as an idle one.
        busy = interval_s if busy_interval_s is None else BUSY_GAP_SHARE * max(busy_interval_s, MIN_CALL_INTERVAL_S)
        self.busy_interval_s = min(busy, interval_s)
        alone = interval_s <= ALONE_PROBE_INTERVAL_S
        self.windows = ShardCallWindows(query_calls_per_s(interval_s))  # the query's calls on each shard
        self.window_wait_s = ALONE_WINDOW_WAIT_S if alone else SHARED_WINDOW_WAIT_S  # for room in a shard's second
        self._phases: dict[str, float] = {}  # shard key -> its moment of the probe interval (``spread``)
        self._phased: frozenset[str] = frozenset()  # the shards the phases were spread over

    def due(self, states: Mapping[str, ShardTurn], now: float) -> list[str]:
        """The shards of ``states`` to ask now, those waiting longest (or never asked at their position) first."""
        due = [key for key, state in states.items() if self._due(key, state, now)]
        return sorted(due, key=lambda key: (_waiting_since(states[key]), key))

    def room_wait(self, states: Mapping[str, ShardTurn], due: list[str], now: float) -> float:
        """How long to wait before asking, for a busy shard that is due but for the calls in its second, when its
        oldest call leaves the second within ``window_wait_s`` (0: no wait)."""
        asked = set(due)  # a list of up to every shard: looked up once per shard
        waits = [
            self.windows.room_in(key, now)
            for key, state in states.items()
            if key not in asked and self._held_by_room(key, state, now)
        ]
        return max((wait for wait in waits if wait <= self.window_wait_s), default=0.0)

    def spread(self, keys: Iterable[str]) -> None:
        """Each stream's shards ``keys`` get their phases spread evenly over the probe interval, in shard order
        (again only when the shards change)."""
        known = frozenset(keys)
        if known == self._phased:
            return
        by_stream: dict[str, list[str]] = {}
        for key in sorted(known):
            by_stream.setdefault(split_shard_key(key)[0], []).append(key)
        self._phases = {
            key: index * self.interval_s / len(group) for group in by_stream.values() for index, key in enumerate(group)
        }
        self._phased = known

    @staticmethod
    def busy_streams(states: Mapping[str, ShardTurn]) -> set[str]:
        """The streams on which some shard of ``states`` is busy."""
        return {split_shard_key(key)[0] for key, state in states.items() if state.busy}

    def woken(
        self, states: Mapping[str, ShardTurn], asked: list[str], busy_streams: set[str], now: float, most: int
    ) -> list[str]:
        """The idle shards to ask at once (``most`` at the most) because a probe just found records on another shard
        of their stream, on which no shard had records before (``busy_streams``): a producer that starts puts records
        on every shard its keys hash to. Each is woken at most once a probe interval, and only with room in its
        second; only the shards returned count as woken (those past ``most`` may be woken at the next start)."""
        started = {split_shard_key(key)[0] for key in asked if states[key].busy} - busy_streams
        if not started:
            return []
        were_asked = set(asked)
        woken = [
            key
            for key, state in sorted(states.items())
            if key not in were_asked
            and split_shard_key(key)[0] in started
            and not state.busy
            and not state.backoff_s
            and state.result is not None
            and state.result.found is Found.NOTHING
            and now - state.woken_at >= self.interval_s
            and self.windows.room_in(key, now) == 0
        ][:most]
        for key in woken:
            states[key].woken_at = now
        return woken

    def _due(self, key: str, state: ShardTurn, now: float) -> bool:
        """Never asked at its position (and not backed off, and the query's answers on it paid back), or its
        interval has passed and it has room (calls in its second, answers paid back)."""
        if state.result is None and state.backoff_s == 0:
            return self.windows.unpaid_in(key, now) == 0
        return self._interval_passed(key, state, now) and self.windows.room_in(key, now) == 0

    def _interval_passed(self, key: str, state: ShardTurn, now: float) -> bool:
        """The shard's answer is at least an interval old (the shard's own after refusals; a shard's end is final),
        or an idle shard's turn came (``_turn_came``). Neither is a target a trigger aims at: a trigger a little
        early reuses the answer, so no trigger period makes a shard cost more than one call per interval."""
        if state.result is not None and state.result.found is Found.SHARD_END:
            return False
        interval = self._interval(state)
        if state.backoff_s or interval < self.interval_s or self.interval_s <= 0:
            return now - state.probed_at >= max(interval, state.backoff_s)
        return self._turn_came(key, state, now)

    def _turn_came(self, key: str, state: ShardTurn, now: float) -> bool:
        """An idle shard's moment of the probe interval (its phase, ``spread``) passed since half an interval after
        its last probe: probes 0.5 to 1.5 intervals apart, one an interval over time, a stream's shards in turn."""
        phase, interval = self._phases.get(key, 0.0), self.interval_s
        turns_since = math.floor((now - phase) / interval) - math.floor(
            (state.probed_at + interval / 2 - phase) / interval
        )
        return turns_since > 0

    def _held_by_room(self, key: str, state: ShardTurn, now: float) -> bool:
        """A busy shard, asked before at its position, that is due but for the calls in its second."""
        return state.busy and state.result is not None and self._interval_passed(key, state, now)

    def _interval(self, state: ShardTurn) -> float:
        """How long after its last call a shard is due: a busy one after the busy interval, an idle one after the
        probe interval, and one that just went quiet after twice the busy interval, then four times, ... up to the
        probe interval (a producer's pause must not leave its next records a whole probe interval to wait)."""
        if state.busy:
            return self.busy_interval_s
        if state.quiet:
            return min(self.interval_s, self.busy_interval_s * 2**state.quiet)
        return self.interval_s


def _waiting_since(state: ShardTurn) -> float:
    """When the shard's answer was last asked for, or, never asked at its position, when it got there."""
    return state.probed_at if state.result is not None else state.since
