"""Driver side: does a shard have records waiting at a position? One GetRecords tells, and brings the first of them.

Who calls it: ``planner.BatchPlanner`` before it plans a micro-batch, for the shards whose last read caught up.
A batch is planned only when some shard has records, so an idle stream runs no empty micro-batches, and new
records are seen within one probe interval instead of after a fixed idle wait.

Cost: at most one GetRecords per shard per probe interval (``kinesis.probeIntervalMs``, 1 s by default: answers
are reused within it, whatever the trigger, and a read that ended at the shard's tip counts as an answer,
``observed``), run in parallel,
and at most ``kinesis.maxProbesPerTrigger`` per call, those asked longest ago first: with thousands of shards
(each call costs the driver ~1 ms of CPU in botocore) a trigger asks a share of them and the rest keep their
last answer, so planning time stays bounded and every shard is asked within a few triggers.
An empty answer's NextShardIterator is kept and used by the next probe, so an idle shard costs no
GetShardIterator either. A probe that sees a record keeps the iterator it asked with (an iterator is a position:
it still points at the record), which the planner hands to the batch's read of the shard (``handoff``). A shard
at a new position starts with the iterator its last read handed on, when it has one (``probe(handoffs=...)``);
an iterator Kinesis refuses is replaced by a new one at the same position.

What a probe asks for: the records of up to ``HELD_BYTES_PER_SHARD`` (by the mean record size of the shard's
earlier answers; ``Limit`` 1 while it is not known, and at most ``HELD_BYTES_PER_TRIGGER`` over all the shards
asked at once), so that on a shard with a few new records the probe's answer is the whole read: the planner hands
it to the batch's task (``held``; GetRecords reads only), whose read takes it as its first page without a call
and asks only for what follows it. The probe's NextShardIterator then points where the next batch starts, so the
next probe needs no GetShardIterator either: one call per shard per batch instead of three.

Busy and idle: an idle shard (a probe found nothing) is asked once per ``kinesis.probeIntervalMs``, at its own turn
of the interval (``_turn_came``): a stream's shards take evenly spread turns, so that new records on any of its N
shards are seen within 1/N of the interval, and the probe that finds them has the stream's other idle shards asked at
once (``_woken``: a producer that starts puts records on every shard its keys hash to). One that was busy just
before is asked after twice the busy interval, then four times, ... up to the probe interval. A busy one (its last probe
or read found records) is asked at a trigger when the query's calls on it (probes, and each read's calls, which
its result lists) that started within the last second (and 10 ms) are fewer than ``SHARED_CALLS_PER_S`` (4: one
of the shard's 5 left to another reader; ``ALONE_CALLS_PER_S``, all 5, when ``kinesis.probeIntervalMs`` is at most
200 ms, which declares the stream read by this query alone) and the last started at least ``busy_interval_s`` ago
(7/8 of ``kinesis.getRecords.fetchIntervalMs``, at least of 200 ms: a trigger a few ms early still counts as a
whole interval later). AWS counts a shard's calls in a sliding second the same way, so any second holds at most 4
of ours and a neighbour polling once a second always finds its call; with a 200 ms trigger 4 of every 5 triggers
ask a busy shard, instead of every other one with a fixed 250 ms between probes. A shard not due is left to a later
trigger, except the one whose oldest call leaves its second within ``window_wait_s`` (60 ms, 30 alone; on a 200 ms
grid the 5th trigger comes exactly a second after the 1st, give or take a few ms): the trigger waits for that moment.

Steady shards are not probed (``deferred``): a shard whose probes and reads found records ``STEADY_ANSWERS`` times
in a row is planned at once, and the batch's read makes the one call a probe would have made, ``READ_LEAD_S`` or
more after the trigger (once Spark has written the offset log and started the task), taking what had arrived by
then. The trigger neither calls nor waits for room in the shard's second (the read waits, if it comes early: the
task's ``not_before_ms``), and records put while Spark prepares the batch are in it instead of the next one
(bench.latency: p50 below the empty source's, whose batch ends at its trigger). The same rate rule decides which
trigger plans the shard. The price: when the producer stops, the next read finds nothing, one empty micro-batch;
that read makes the shard quiet, and it is probed again.

Throttling: a probe Kinesis refuses for the shard's read quota (shared with every other reader) is not retried:
the shard keeps its last answer (or has none yet), its interval doubles (up to ``MAX_BACKOFF_INTERVALS`` times
the probe interval) until a probe gets through, and the refusal is counted (``refused``, for the query's health).
"""

from __future__ import annotations

import enum
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from ..aws.clients import RAW_BODY
from ..clock import monotonic_at, now_ms
from ..fetch.decode import Page, ShardContext, decode_get_records
from ..fetch.iterators import (
    Handoff,
    HeldAnswer,
    PositionGoneError,
    ShardGoneError,
    freshest,
    open_iterator,
    refused_iterator,
)
from ..parallel import WORKERS, parallel_map
from ..positions import Position, shard_label, split_shard_key
from ..record_sizes import RecordSizes, sized_limit
from ..retry import RetriesExhaustedError, RetryPolicy, is_throttled, quota_backoff
from ..shards import MAX_HASH_KEY
from .call_window import ShardCallWindows

log = logging.getLogger(__name__)
MAX_ASKS = 1000  # kinesis.maxProbesPerTrigger's default
MAX_LIMIT = 10_000  # GetRecords' Limit at most (AWS)
MAX_BACKOFF_INTERVALS = 8  # a refused shard's probe interval doubles up to this many probe intervals
# A busy shard's calls in any second leave one of its 5 GetRecords to another reader (Lambda polls once a second)...
SHARED_CALLS_PER_S = 4
ALONE_CALLS_PER_S = 5  # ...unless kinesis.probeIntervalMs <= ALONE_PROBE_INTERVAL_S says the query reads it alone
ALONE_PROBE_INTERVAL_S = 0.2
MIN_CALL_INTERVAL_S = 0.2  # AWS's pace for 5 calls a second: the least fetch interval the busy gap is taken from
# A busy shard's calls are at least this share of the fetch interval apart: triggers on a grid of that interval come
# a few ms early or late (the work before the probe varies), and a call a little early must not skip a trigger.
BUSY_GAP_SHARE = 0.875
# Triggers on a 200 ms grid put a busy shard's 5th call exactly a second after its 1st: one that comes a few ms early
# finds the 1st still in its second. It waits this long at most for that call to leave, instead of a whole trigger.
# Each such wait makes the call 10 ms (the window's margin) later than the one a second before it, and the lateness
# adds up until a trigger is skipped. Sharing the shard (4 calls a second), that trigger follows the one skipped
# every second: at 30 ms a shard went unasked at two triggers in a row (a 600 ms gap, the p99's tail) 6 times in a
# 30 s run of bench.latency, at 60 ms none in two. Alone (5 calls a second) every call waits, and a single skip
# costs one trigger: there 30 ms measured no worse (bench.latency p50 216-235 ms in five runs of six, 261 in the
# sixth; 223-278 ms in six runs at 60 ms).
SHARED_WINDOW_WAIT_S = 0.06
ALONE_WINDOW_WAIT_S = 0.03
# A batch's read makes its first call about this long after the trigger that planned it, at the earliest (Spark writes
# the offset log and plans the batch, the task starts: 35-60 ms in bench.latency): a shard read without a probe
# (``ShardProber.deferred``) whose second has room by then costs the trigger no wait.
READ_LEAD_S = 0.04
# A shard whose probes and reads found records this many times in a row (a probe and the read that took its answer
# count two) is read without a probe (``ShardProber.deferred``): a steady stream (records at five triggers in a row
# or more), whose stop then costs one empty micro-batch. A burst read in a few batches never does.
STEADY_ANSWERS = 10
HELD_BYTES_PER_SHARD = 64 * 1024  # a probe asks for about this much (3 % of a shard's 2 MiB/s at 1 probe/s)
HELD_BYTES_PER_TRIGGER = 4 * 1024 * 1024  # and all probes of one call together, whatever the shard count


def backed_off(previous_s: float, interval_s: float) -> float:
    """A refused shard's next probe interval: ``quota_backoff`` from the longer of the last wait and the probe
    interval, at most ``MAX_BACKOFF_INTERVALS`` probe intervals."""
    return quota_backoff(max(previous_s, interval_s), MAX_BACKOFF_INTERVALS * interval_s)


class Found(enum.Enum):
    DATA = "data"  # a record (arrived within the bound), or MillisBehindLatest > 0
    NOTHING = "nothing"  # at the tip, or the next record arrived after the bound
    SHARD_END = "shardEnd"  # a closed shard with nothing after the position
    POSITION_GONE = "positionGone"  # the position's record was trimmed (or the stream re-created)
    SHARD_GONE = "shardGone"  # the shard does not exist any more


@dataclass(frozen=True)
class ProbeResult:
    found: Found
    millis_behind_latest: int | None = None
    arrival_ms: int | None = None  # the probed record's arrival time, when one was seen
    error: str | None = None  # what Kinesis said, for POSITION_GONE / SHARD_GONE


@dataclass
class _ShardState:
    position: Position
    result: ProbeResult | None = None
    probed_at: float = 0.0
    iterator: Handoff | None = None  # a GetRecords iterator at ``position``
    since: float = field(default_factory=time.monotonic)  # when the shard reached this position
    backoff_s: float = 0.0  # after refusals: the shard's own, longer interval (0: the prober's)
    called_ms: int | None = None  # when the last probe's GetRecords started (wall ms), for the shard's next read
    held: HeldAnswer | None = None  # the last probe's answer when it had records (the read's first page)
    busy: bool = False  # the last probe or read found records: asked by the rate rule (``ShardProber._due``)
    quiet: int = 0  # probes in a row that found nothing since the shard was busy (``ShardProber._interval``)
    found_in_row: int = 0  # probes and reads in a row that found records (``ShardProber.deferred``)
    woken_at: float = -math.inf  # when a sibling's records last had it asked out of turn (``ShardProber._woken``)


class ShardProber:
    """Probes shards for waiting records, remembering iterators and answers between calls (driver only)."""

    def __init__(
        self,
        client_factory: Callable[[], Any],
        retry: RetryPolicy,
        interval_s: float,
        workers: int = WORKERS,
        max_asks: int = MAX_ASKS,
        busy_interval_s: float | None = None,
        held_bytes: int = HELD_BYTES_PER_SHARD,
        max_limit: int = MAX_LIMIT,
    ):
        self._client_factory = client_factory  # a raw-body reader client (aws.clients.kinesis_reader_client)
        self.workers = workers  # probes at a time (kinesis.checkNewRecordThreads)
        self.max_asks = max_asks  # shards asked per call at most (kinesis.maxProbesPerTrigger)
        self._retry = retry
        self.interval_s = interval_s
        # busy_interval_s None (enhanced fan-out): a busy shard is asked as seldom as an idle one.
        busy = interval_s if busy_interval_s is None else BUSY_GAP_SHARE * max(busy_interval_s, MIN_CALL_INTERVAL_S)
        self.busy_interval_s = min(busy, interval_s)
        alone = interval_s <= ALONE_PROBE_INTERVAL_S
        # Of a busy shard's calls in any second; none counted where an idle shard is asked more often than AWS
        # allows a shard (kinesis.probeIntervalMs below 200 ms: whoever sets it takes the refusals).
        calls_per_s = (
            None if interval_s < ALONE_PROBE_INTERVAL_S else ALONE_CALLS_PER_S if alone else SHARED_CALLS_PER_S
        )
        self.windows = ShardCallWindows(calls_per_s)  # the query's calls on each shard in its second
        self.window_wait_s = ALONE_WINDOW_WAIT_S if alone else SHARED_WINDOW_WAIT_S  # for room in a shard's second
        self._sleep = time.sleep  # tests replace it
        self.held_bytes = held_bytes  # 0: Limit 1, nothing held (enhanced fan-out reads cannot take a page)
        self.max_limit = max_limit  # kinesis.getRecords.numberOfRecordsPerFetch: no call asks for more
        self._record_bytes: RecordSizes[str] = RecordSizes()  # of the records each shard's probes saw
        self._states: dict[str, _ShardState] = {}
        self._phases: dict[str, float] = {}  # shard key -> its moment of the probe interval (``_spread``)
        self._phased: frozenset[str] = frozenset()  # the shards the phases were spread over
        self._lock = threading.Lock()
        self.calls = 0  # GetRecords calls made (probes run on several threads), for tests and logs
        self.refused: dict[str, int] = {}  # shard key -> probes refused for a quota, since the last take_refused

    def probe(
        self,
        positions: Mapping[str, Position],
        bound_ms: int | None = None,
        handoffs: Mapping[str, Handoff] | None = None,
    ) -> dict[str, ProbeResult]:
        """An answer per shard key that has one; ``bound_ms``: a record that arrived after it does not count
        (AvailableNow); ``handoffs``: iterators known elsewhere (a read's last), used where no iterator is kept.

        Shards whose answer is older than the interval are asked again, at most ``max_asks`` of them, those asked
        longest ago (or never) first; the others keep their last answer, and a shard never asked at its position
        has none yet (it is left out, and asked first next time).
        """
        states = {key: self._state(key, position, (handoffs or {}).get(key)) for key, position in positions.items()}
        self._spread()
        now = time.monotonic()
        busy_streams = {split_shard_key(key)[0] for key, state in self._states.items() if state.busy}
        due = [key for key, state in states.items() if self._due(key, state, now)]
        waits = [
            self.windows.room_in(key, now)
            for key, state in states.items()
            if key not in due and self._held_by_room(key, state, now)
        ]
        if (wait := max((w for w in waits if w <= self.window_wait_s), default=0.0)) > 0:
            self._sleep(wait)  # a busy shard's oldest call leaves its second in a moment: ask after it
            now = time.monotonic()
            due = [key for key, state in states.items() if self._due(key, state, now)]
        log.debug(
            "probe: %d shards, due %s, busy %s",
            len(states),
            sorted(due),
            sorted(key for key, state in states.items() if state.busy),
        )
        due.sort(key=lambda key: (self._waiting_since(states[key]), key))
        asked = due[: self.max_asks]
        budget = min(self.held_bytes, HELD_BYTES_PER_TRIGGER // max(1, len(asked)))
        parallel_map(lambda key: self._refresh(key, states[key], bound_ms, budget), asked, self.workers)
        woken = self._woken(states, asked, busy_streams, time.monotonic(), self.max_asks - len(asked))
        parallel_map(lambda key: self._refresh(key, states[key], bound_ms, budget), woken, self.workers)
        return {key: result for key in sorted(states) if (result := states[key].result) is not None}

    def observed(self, key: str, position: Position, handoff: Handoff) -> None:
        """A read of ``key`` ended at the shard's tip at ``position`` with ``handoff`` (its last NextShardIterator):
        that answer stands for a probe made when the iterator came, so the next probe waits a whole interval
        after the read's last call (called by the planner for reads that stopped caught up)."""
        state = self._state(key, position, handoff)
        if state.result is not None and state.probed_at >= monotonic_at(handoff.at_ms):
            return  # a probe of this position is newer
        state.result = ProbeResult(Found.NOTHING, 0)
        state.probed_at = monotonic_at(handoff.at_ms)

    def read_ended(self, key: str, position: Position, took_records: bool) -> None:
        """A batch's read of ``key`` ended at ``position``, having found records or not: like a probe's answer, it
        makes the shard busy (and, in a row, steady: ``deferred``) or quiet."""
        self._found(self._state(key, position, None), took_records)

    def deferred(self, positions: Mapping[str, Position], handoffs: Mapping[str, Handoff]) -> dict[str, int]:
        """The steady shards among ``positions`` that a batch reads without a probe first, each with the wall-clock
        ms from which its second has room for the read's first call (``ShardTask.not_before_ms``).

        A shard is steady when its probes and reads found records ``STEADY_ANSWERS`` times in a row, the last
        just now. Asking it again at the trigger only to hear "yes" would cost the trigger a call and, when its
        second is full, a wait: the batch's read makes that call instead, after Spark's own work between the trigger
        and the task (the offset log, planning: ~40 ms), and takes what had arrived by then
        (``FetchLimits.stop_at_first_call``). Only with GetRecords reads that can start at once (an iterator at the
        position is known) and whose second has room within ``window_wait_s`` of the read's first call
        (``READ_LEAD_S`` from now); a read that then finds nothing makes the shard quiet (``read_ended``): one empty
        batch when a producer stops.
        """
        if self.held_bytes == 0:  # enhanced fan-out: probes are the query's only GetRecords
            return {}
        now, wall_ms = time.monotonic(), now_ms()
        chosen: dict[str, int] = {}
        for key, position in positions.items():
            state = self._states.get(key)
            if state is None or state.position != position or not state.busy or state.backoff_s:
                continue
            if state.found_in_row < STEADY_ANSWERS:
                continue
            if freshest(position, state.iterator, handoffs.get(key)) is None:
                continue
            room_s = self.windows.room_in(key, now)  # the read calls READ_LEAD_S from now or later, and not before this
            if room_s - READ_LEAD_S <= self.window_wait_s:
                chosen[key] = wall_ms + math.ceil(room_s * 1000)
        return chosen

    def read_called(self, key: str, called_ms: int) -> None:
        """A batch's read of ``key`` made a GetRecords at ``called_ms`` (wall ms; the planner passes each of the
        read's last calls, ``ShardRead.call_starts_ms``): one of the query's calls on the shard in its second (a
        read's first page that was a probe's held answer names the probe's call: not counted twice)."""
        self.windows.heard(key, monotonic_at(called_ms), called_ms)

    @property
    def calls_per_s(self) -> int | None:
        """Of a busy shard's calls in any second, how many the query makes at most (None: not counted)."""
        return self.windows.calls_per_s

    def calls_within_window(self, key: str, now: float) -> int:
        """The query's calls on ``key`` that started within the last second (as AWS counts them)."""
        return self.windows.count(key, now)

    def take_refused(self) -> dict[str, int]:
        """Probes refused per shard since the last call (the planner hands them to the query's health)."""
        with self._lock:
            refused, self.refused = self.refused, {}
        return refused

    def forget(self, keep: set[str]) -> None:
        """Drop the state of shards no longer tracked."""
        for key in [key for key in self._states if key not in keep]:
            del self._states[key]
        self.windows.forget(keep)
        self._record_bytes.keep_only(keep)

    def held(self, key: str, position: Position) -> HeldAnswer | None:
        """The last probe's answer for ``key`` at ``position`` when it had records and still serves (the read's
        first page: ``ShardTask.held``)."""
        state = self._states.get(key)
        held = state.held if state is not None else None
        return held if held is not None and held.usable_for(position) else None

    def handoff(self, key: str, position: Position) -> Handoff | None:
        """The iterator this prober holds for ``key`` at ``position``, while it is fresh (for the shard's read)."""
        state = self._states.get(key)
        iterator = state.iterator if state is not None else None
        return iterator if iterator is not None and iterator.usable_for(position) else None

    def last_call_ms(self, key: str) -> int | None:
        """When this prober's last GetRecords on ``key`` started (wall ms): the batch's read of the shard keeps
        the fetch interval after it (``ShardTask.last_call_ms``), so a probe and the read it plans are two calls
        of the shard's five a second, not a burst."""
        state = self._states.get(key)
        return state.called_ms if state is not None else None

    def _state(self, key: str, position: Position, handoff: Handoff | None) -> _ShardState:
        state = self._states.get(key)
        if state is None or state.position != position:
            # A known shard at a new position: a read took records from it, so it is busy until a probe finds none.
            kept = state.found_in_row if state is not None else 0
            state = self._states[key] = _ShardState(position, busy=state is not None, found_in_row=kept)
        state.iterator = freshest(position, state.iterator, handoff)  # the one kept, or a fresher one handed over
        return state

    def _due(self, key: str, state: _ShardState, now: float) -> bool:
        """Never asked at its position (and not backed off), or its interval has passed and its second has room."""
        if state.result is None and state.backoff_s == 0:
            return True
        return self._interval_passed(key, state, now) and self.windows.room_in(key, now) == 0

    def _interval_passed(self, key: str, state: _ShardState, now: float) -> bool:
        """The shard's answer is at least an interval old (the shard's own after refusals; a shard's end is final),
        or an idle shard's turn of the probe interval came (``_turn_came``). Neither is a target a trigger aims
        at: a trigger that comes a little early reuses the answer, so no trigger period makes a shard cost more
        than one call per interval."""
        if state.result is not None and state.result.found is Found.SHARD_END:
            return False
        interval = self._interval(state)
        if state.backoff_s or interval < self.interval_s or self.interval_s <= 0:
            return now - state.probed_at >= max(interval, state.backoff_s)
        return self._turn_came(key, state, now)

    def _turn_came(self, key: str, state: _ShardState, now: float) -> bool:
        """An idle shard is asked once a probe interval, at its own moment of it (its phase, ``_spread``): when one
        of those moments passed since half an interval after its last probe. Probes are then 0.5 to 1.5 intervals
        apart, one an interval over time, and a stream's idle shards take turns instead of being asked together:
        new records on any of N shards are seen within 1/N of the interval, when ``_woken`` asks the others."""
        phase, interval = self._phases.get(key, 0.0), self.interval_s
        turns_since = math.floor((now - phase) / interval) - math.floor(
            (state.probed_at + interval / 2 - phase) / interval
        )
        return turns_since > 0

    def _spread(self) -> None:
        """Each stream's shards known here get their phases spread evenly over the probe interval, in shard order
        (again only when the shards change)."""
        keys = frozenset(self._states)
        if keys == self._phased:
            return
        by_stream: dict[str, list[str]] = {}
        for key in sorted(keys):
            by_stream.setdefault(split_shard_key(key)[0], []).append(key)
        self._phases = {
            key: index * self.interval_s / len(group) for group in by_stream.values() for index, key in enumerate(group)
        }
        self._phased = keys

    def _woken(
        self, states: Mapping[str, _ShardState], asked: list[str], busy_streams: set[str], now: float, most: int
    ) -> list[str]:
        """The idle shards to ask at once (``most`` at the most) because a probe just found records on another shard
        of their stream, on which no shard had records before (a producer starting: its records are on every shard
        its keys hash to, and each idle shard would be asked only at its own turn, up to a probe interval later).
        Each is woken at most once a probe interval, and only with room in its second: a stream whose shards take
        turns at finding a record now and then costs each idle shard two calls an interval at the most. Only the
        shards returned count as woken (those past ``most`` may be woken at the next start)."""
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

    def _held_by_room(self, key: str, state: _ShardState, now: float) -> bool:
        """A busy shard, asked before at its position, that is due but for the calls in its second."""
        return state.busy and state.result is not None and self._interval_passed(key, state, now)

    def _interval(self, state: _ShardState) -> float:
        """How long after its last call a shard is due: a busy one after the busy interval, an idle one after the
        probe interval, and one that just went quiet after twice the busy interval, then four times, ... up to the
        probe interval: a busy shard whose probe came between two puts (a producer's pause) would otherwise leave
        its next records a whole probe interval (1 s) to wait."""
        if state.busy:
            return self.busy_interval_s
        if state.quiet:
            return min(self.interval_s, self.busy_interval_s * 2**state.quiet)
        return self.interval_s

    @staticmethod
    def _waiting_since(state: _ShardState) -> float:
        """When the shard's answer was last asked for, or, never asked at its position, when it got there."""
        return state.probed_at if state.result is not None else state.since

    def _refresh(self, key: str, state: _ShardState, bound_ms: int | None, budget_bytes: int) -> None:
        now = time.monotonic()
        try:
            state.result = self._ask(key, state, bound_ms, self._limit(key, budget_bytes))
        except (ClientError, RetriesExhaustedError) as exc:
            if not is_throttled(exc):
                raise
            # Over the shard's read quota: keep the last answer, ask again later (never at once), count it.
            state.backoff_s = backed_off(state.backoff_s, self.interval_s)
            with self._lock:
                self.refused[key] = self.refused.get(key, 0) + 1
        else:
            state.backoff_s = 0.0
        state.probed_at = now

    def _limit(self, key: str, budget_bytes: int) -> int:
        """The probe's ``Limit``: the shard's records that fit ``budget_bytes`` by their known mean size (1 while
        the size is unknown or nothing is to be held), at most the options' (and AWS's 10,000)."""
        return sized_limit(budget_bytes, self._record_bytes.get(key), 1, self.max_limit)

    def _ask(self, key: str, state: _ShardState, bound_ms: int | None, limit: int) -> ProbeResult:
        stream, shard_id = split_shard_key(key)
        what = shard_label(stream, shard_id)
        kinesis = self._client_factory()
        for _attempt in range(2):  # a second time only after an expired or refused iterator
            kept = state.iterator is not None and state.iterator.usable_for(state.position)
            try:
                if not kept:
                    opened = open_iterator(kinesis, stream, shard_id, state.position, self._retry, what)
                    state.iterator = Handoff.received(state.position, opened)
                assert state.iterator is not None
                called = (time.monotonic(), now_ms())
                with self._lock:
                    self.calls += 1
                self.windows.called(key, *called)
                state.called_ms = called[1]
                answer = self._retry.call(
                    kinesis.get_records,
                    ShardIterator=state.iterator.iterator,
                    Limit=limit,
                    what=f"GetRecords (probe) on {what}",
                    retry_throttled=False,
                )
            except PositionGoneError as gone:
                return ProbeResult(Found.POSITION_GONE, error=str(gone))
            except ShardGoneError as gone:
                return ProbeResult(Found.SHARD_GONE, error=str(gone))
            except ClientError as exc:
                if not refused_iterator(exc, inherited=kept):
                    raise
                state.iterator = None
                continue
            body = answer[RAW_BODY]
            page = decode_get_records(body, ShardContext(stream, shard_id, 0, MAX_HASH_KEY, deaggregate=False))
            self._record_bytes.learn(key, page.kinesis_records, page.kinesis_bytes)
            result = self._judge(state, page, bound_ms)
            keep = result.found is Found.DATA and page.kinesis_records and self.held_bytes > 0
            state.held = HeldAnswer(state.position, bytes(body), limit, state.called_ms) if keep else None
            self._found(state, result.found is Found.DATA)
            return result
        raise RuntimeError(f"GetRecords (probe) on {what}: a fresh shard iterator expired at once")

    @staticmethod
    def _found(state: _ShardState, found: bool) -> None:
        """A probe or read of the shard found records, or not: busy, or one more quiet answer since it was."""
        state.quiet = 0 if found else state.quiet + 1 if state.busy or state.quiet else 0
        state.busy = found
        state.found_in_row = state.found_in_row + 1 if found else 0

    @staticmethod
    def _judge(state: _ShardState, page: Page, bound_ms: int | None) -> ProbeResult:
        behind = page.millis_behind_latest
        if page.kinesis_records:  # the iterator asked with still points at the first record: kept
            arrival_us = page.arrivals_us[0]
            arrival_ms = arrival_us // 1000 if arrival_us is not None else None
            late = bound_ms is not None and arrival_ms is not None and arrival_ms > bound_ms
            return ProbeResult(Found.NOTHING if late else Found.DATA, behind, arrival_ms)
        following = page.next_iterator
        state.iterator = Handoff.received(state.position, following) if following is not None else None
        if following is None:
            return ProbeResult(Found.SHARD_END, behind)
        if behind:  # nothing in this stretch, but records further on (AWS skips through old, empty stretches)
            return ProbeResult(Found.DATA, behind)
        return ProbeResult(Found.NOTHING, behind)
