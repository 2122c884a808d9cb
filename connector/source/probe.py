"""Driver side: does a shard have records waiting at a position? One cheap GetRecords (Limit 1) tells.

Who calls it: ``planner.BatchPlanner`` before it plans a micro-batch, for the shards whose last read caught up.
A batch is planned only when some shard has records, so an idle stream runs no empty micro-batches, and new
records are seen within one probe interval instead of after a fixed idle wait.

Cost: at most one GetRecords per shard per probe interval (answers are reused within it), run in parallel,
and at most ``kinesis.maxProbesPerTrigger`` per call, those asked longest ago first: with thousands of shards
(each call costs the driver ~1 ms of CPU in botocore) a trigger asks a share of them and the rest keep their
last answer, so planning time stays bounded and every shard is asked within a few triggers.
An empty answer's NextShardIterator is kept and used by the next probe, so an idle shard costs no
GetShardIterator either. A probe that sees a record keeps the iterator it asked with (an iterator is a position:
it still points at the record), which the planner hands to the batch's read of the shard (``handoff``). A shard
at a new position starts with the iterator its last read handed on, when it has one (``probe(handoffs=...)``);
an iterator Kinesis refuses is replaced by a new one at the same position.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from ..fetch.iterators import (
    Handoff,
    PositionGoneError,
    ShardGoneError,
    freshest,
    open_iterator,
    refused_iterator,
)
from ..parallel import WORKERS, parallel_map
from ..positions import Position, shard_label, split_shard_key
from ..retry import RetryPolicy

# An answer younger than the interval is reused, but triggers on the interval's own period arrive a few ms
# early or late: without this slack, every other one would reuse the answer and see new records an interval late.
INTERVAL_SLACK = 0.1
MAX_ASKS = 1000  # kinesis.maxProbesPerTrigger's default


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


class ShardProber:
    """Probes shards for waiting records, remembering iterators and answers between calls (driver only)."""

    def __init__(
        self,
        client_factory: Callable[[], Any],
        retry: RetryPolicy,
        interval_s: float,
        workers: int = WORKERS,
        max_asks: int = MAX_ASKS,
    ):
        self._client_factory = client_factory
        self.workers = workers  # probes at a time (kinesis.checkNewRecordThreads)
        self.max_asks = max_asks  # shards asked per call at most (kinesis.maxProbesPerTrigger)
        self._retry = retry
        self.interval_s = interval_s
        self._states: dict[str, _ShardState] = {}
        self._lock = threading.Lock()
        self.calls = 0  # GetRecords calls made (probes run on several threads), for tests and logs

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
        now = time.monotonic()
        due = [key for key, state in states.items() if self._due(state, now)]
        due.sort(key=lambda key: (self._waiting_since(states[key]), key))
        asked = due[: self.max_asks]
        parallel_map(lambda key: self._refresh(key, states[key], bound_ms), asked, self.workers)
        return {key: result for key in sorted(states) if (result := states[key].result) is not None}

    def forget(self, keep: set[str]) -> None:
        """Drop the state of shards no longer tracked."""
        for key in [key for key in self._states if key not in keep]:
            del self._states[key]

    def handoff(self, key: str, position: Position) -> Handoff | None:
        """The iterator this prober holds for ``key`` at ``position``, while it is fresh (for the shard's read)."""
        state = self._states.get(key)
        iterator = state.iterator if state is not None else None
        return iterator if iterator is not None and iterator.usable_for(position) else None

    def _state(self, key: str, position: Position, handoff: Handoff | None) -> _ShardState:
        state = self._states.get(key)
        if state is None or state.position != position:
            state = self._states[key] = _ShardState(position)
        state.iterator = freshest(position, state.iterator, handoff)  # the one kept, or a fresher one handed over
        return state

    def _due(self, state: _ShardState, now: float) -> bool:
        """No answer yet, or one older than the interval (a shard's end is final)."""
        if state.result is None:
            return True
        fresh_for = self.interval_s * (1 - INTERVAL_SLACK)
        return state.result.found is not Found.SHARD_END and now - state.probed_at >= fresh_for

    @staticmethod
    def _waiting_since(state: _ShardState) -> float:
        """When the shard's answer was last asked for, or, never asked at its position, when it got there."""
        return state.probed_at if state.result is not None else state.since

    def _refresh(self, key: str, state: _ShardState, bound_ms: int | None) -> None:
        now = time.monotonic()
        state.result = self._ask(key, state, bound_ms)
        state.probed_at = now

    def _ask(self, key: str, state: _ShardState, bound_ms: int | None) -> ProbeResult:
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
                with self._lock:
                    self.calls += 1
                answer = self._retry.call(
                    kinesis.get_records,
                    ShardIterator=state.iterator.iterator,
                    Limit=1,
                    what=f"GetRecords (probe) on {what}",
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
            return self._judge(state, answer, bound_ms)
        raise RuntimeError(f"GetRecords (probe) on {what}: a fresh shard iterator expired at once")

    @staticmethod
    def _judge(state: _ShardState, answer: dict[str, Any], bound_ms: int | None) -> ProbeResult:
        behind = answer.get("MillisBehindLatest")
        records = answer.get("Records") or []
        if records:  # the iterator asked with still points at the record: kept, NextShardIterator is past it
            arrival = records[0].get("ApproximateArrivalTimestamp")
            arrival_ms = round(arrival.timestamp() * 1000) if arrival is not None else None
            late = bound_ms is not None and arrival_ms is not None and arrival_ms > bound_ms
            return ProbeResult(Found.NOTHING if late else Found.DATA, behind, arrival_ms)
        following = answer.get("NextShardIterator")
        state.iterator = Handoff.received(state.position, following) if following is not None else None
        if following is None:
            return ProbeResult(Found.SHARD_END, behind)
        if behind:  # nothing in this stretch, but records further on (AWS skips through old, empty stretches)
            return ProbeResult(Found.DATA, behind)
        return ProbeResult(Found.NOTHING, behind)
