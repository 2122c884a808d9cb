"""Driver side: does a shard have records waiting at a position? One GetRecords tells, and brings the first of them.

Who calls it: ``planner.BatchPlanner`` before it plans a micro-batch, for the shards whose last read caught up
(``ShardProber.probe``), and for the steady shards it plans without asking (``deferred``). The prober asks: it keeps
each shard's iterator and hands it on, sizes a probe's ``Limit`` to hold the batch's whole read (``held``), and counts
refusals; ``probe_turns`` decides which shards are due, ``probe_deferral`` which steady shards are not asked,
``probe_answers`` what an answer says. What it costs a shard and why: docs/source.md, "How a micro-batch is planned
and read" and "What the source costs a shard".
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ..aws.clients import RAW_BODY
from ..clock import monotonic_at, now_ms
from ..fetch.arrow_columns import build_from_buffers
from ..fetch.decode import ShardContext, summarize_get_records
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
from ..retry import RetriesExhaustedError, RetryPolicy, is_throttled
from ..shards import MAX_HASH_KEY
from ..stream_ids import arn_param
from .probe_answers import Found, ProbeResult, judge
from .probe_deferral import SteadyShards
from .probe_turns import ProbeTurns, ShardTurn, backed_off

log = logging.getLogger(__name__)
MAX_ASKS = 1000  # kinesis.maxProbesPerTrigger's default
MAX_LIMIT = 10_000  # GetRecords' Limit at most (AWS)
HELD_BYTES_PER_SHARD = 64 * 1024  # a probe asks for about this much (3 % of a shard's 2 MiB/s at 1 probe/s)
HELD_BYTES_PER_TRIGGER = 4 * 1024 * 1024  # and all probes of one call together, whatever the shard count
MAX_PAY_BACK_S = 5.0  # a read's answers are paid back within this (a 10 MiB answer: 5 s at 2 MiB/s)


@dataclass(kw_only=True)
class _ShardState(ShardTurn):
    """A shard's state at its position: the schedule's part (``ShardTurn``) and what the next ask starts from."""

    position: Position
    iterator: Handoff | None = None  # a GetRecords iterator at ``position``
    called_ms: int | None = None  # when the last probe's GetRecords started (wall ms), for the shard's next read
    held: HeldAnswer | None = None  # the last probe's answer when it had records (the read's first page)


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
        build_from_buffers()  # a driver that completes a read builds its pages: no pandas import for them
        self._retry = retry
        self.workers = workers  # probes at a time (kinesis.checkNewRecordThreads)
        self.max_asks = max_asks  # shards asked per call at most (kinesis.maxProbesPerTrigger)
        self.interval_s = interval_s
        self.turns = ProbeTurns(interval_s, busy_interval_s)  # which shards are due
        self.busy_interval_s = self.turns.busy_interval_s
        self.windows = self.turns.windows  # the query's calls on each shard in its second
        self.steady = SteadyShards(self.windows, self.turns.window_wait_s)  # shards read without a probe
        self._sleep = time.sleep  # tests replace it
        self.held_bytes = held_bytes  # 0: Limit 1, nothing held (enhanced fan-out reads cannot take a page)
        self.max_limit = max_limit  # kinesis.getRecords.numberOfRecordsPerFetch: no call asks for more
        self._record_bytes: RecordSizes[str] = RecordSizes()  # of the records each shard's probes saw
        self._states: dict[str, _ShardState] = {}
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
        self.turns.spread(self._states)
        now = time.monotonic()
        busy_streams = self.turns.busy_streams(self._states)
        due = self.turns.due(states, now)
        if (wait := self.turns.room_wait(states, due, now)) > 0:
            self._sleep(wait)  # a busy shard's oldest call leaves its second in a moment: ask after it
            due = self.turns.due(states, time.monotonic())
        if log.isEnabledFor(logging.DEBUG):  # two sorts of every shard key, each trigger
            busy = sorted(key for key, state in states.items() if state.busy)
            log.debug("probe: %d shards, due %s, busy %s", len(states), sorted(due), busy)
        asked = due[: self.max_asks]
        budget = min(self.held_bytes, HELD_BYTES_PER_TRIGGER // max(1, len(asked)))
        parallel_map(lambda key: self._refresh(key, states[key], bound_ms, budget), asked, self.workers)
        woken = self.turns.woken(states, asked, busy_streams, time.monotonic(), self.max_asks - len(asked))
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
        self._found(key, self._state(key, position, None), took_records)

    def deferred(self, positions: Mapping[str, Position], handoffs: Mapping[str, Handoff]) -> dict[str, int]:
        """The steady shards among ``positions`` that a batch reads without a probe first (``probe_deferral``), each
        with the wall-clock ms from which its second has room for the read's first call (``ShardTask.not_before_ms``):
        busy ones, not backing off, whose GetRecords read can start at once (an iterator at the position is known)."""
        if self.held_bytes == 0:  # enhanced fan-out: probes are the query's only GetRecords
            return {}
        now, wall_ms = time.monotonic(), now_ms()
        ready = [
            key
            for key, position in positions.items()
            if (state := self._states.get(key)) is not None
            and state.position == position
            and state.busy
            and not state.backoff_s
            and freshest(position, state.iterator, handoffs.get(key)) is not None
        ]
        return self.steady.read_starts(ready, now, wall_ms)

    def room_from_ms(self, key: str) -> int | None:
        """The wall-clock ms from which the shard's second has room for one more of the query's calls, counting
        every call known (None: it has room now); a read's first call waits for it (``ShardTask.not_before_ms``)."""
        room_s = self.windows.room_in(key, time.monotonic())
        return now_ms() + math.ceil(room_s * 1000) if room_s > 0 else None

    def read_called(self, key: str, called_ms: int) -> None:
        """A batch's read of ``key`` made a GetRecords at ``called_ms`` (wall ms; the planner passes each of the
        read's last calls, ``ShardRead.call_starts_ms``): one of the query's calls on the shard in its second (a
        read's first page that was a probe's held answer names the probe's call: not counted twice)."""
        self.windows.heard(key, monotonic_at(called_ms), called_ms)

    def read_paid(self, key: str, paid_ms: int) -> None:
        """A batch's read of ``key`` left the shard paying back its answers until ``paid_ms`` (wall ms,
        ``ShardRead.paid_ms``): no probe or read of the shard before then (an executor's clock that runs ahead
        delays them by at most ``MAX_PAY_BACK_S``)."""
        self.windows.paid_by(key, time.monotonic() + min((paid_ms - now_ms()) / 1000, MAX_PAY_BACK_S))

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
        self.steady.forget(keep)
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
            state = self._states[key] = _ShardState(position=position, busy=state is not None)
        state.iterator = freshest(position, state.iterator, handoff)  # the one kept, or a fresher one handed over
        return state

    def _found(self, key: str, state: _ShardState, found: bool) -> None:
        """A probe or read of the shard found records, or not: for its turns and its steadiness."""
        state.heard(found)
        self.steady.heard(key, found)

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
        sizes = self._record_bytes
        return sized_limit(budget_bytes, sizes.get(key), 1, self.max_limit, sizes.large_share(key))

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
                    **arn_param(stream),
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
            summary = summarize_get_records(body, ShardContext(stream, shard_id, 0, MAX_HASH_KEY))
            self._record_bytes.learn(key, summary.kinesis_records, summary.kinesis_bytes, summary.large)
            self.windows.answered(key, called[0], time.monotonic(), summary.kinesis_bytes)
            if not summary.kinesis_records:  # the next probe asks from the answer's NextShardIterator (none: the end)
                following = summary.next_iterator
                state.iterator = Handoff.received(state.position, following) if following is not None else None
            # else the iterator asked with still points at the first record: kept, for the read
            result = judge(summary, bound_ms)
            keep = result.found is Found.DATA and summary.kinesis_records and self.held_bytes > 0
            state.held = HeldAnswer(state.position, bytes(body), limit, state.called_ms) if keep else None
            self._found(key, state, result.found is Found.DATA)
            return result
        raise RuntimeError(f"GetRecords (probe) on {what}: a fresh shard iterator expired at once")
