"""Driver side: does a shard have records waiting at a position? One cheap GetRecords (Limit 1) tells.

Who calls it: ``planner.BatchPlanner`` before it plans a micro-batch, for the shards whose last read caught up.
A batch is planned only when some shard has records, so an idle stream runs no empty micro-batches, and new
records are seen within one probe interval instead of after a fixed idle wait.

Cost: at most one GetRecords per shard per probe interval (answers are reused within it), run in parallel.
An empty answer's NextShardIterator is kept and used by the next probe, so an idle shard costs no
GetShardIterator either. A probe that sees a record forgets its iterator: the record is not consumed, the
executors read it from the position.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from connector.fetch.iterators import PositionGoneError, ShardGoneError, open_iterator
from connector.offsets import Position, shard_label, split_shard_key
from connector.parallel import WORKERS, parallel_map
from connector.retry import RetryPolicy, error_code

ITERATOR_MAX_AGE_S = 240.0  # Kinesis iterators expire after 5 minutes
# An answer younger than the interval is reused, but triggers on the interval's own period arrive a few ms
# early or late: without this slack, every other one would reuse the answer and see new records an interval late.
INTERVAL_SLACK = 0.1


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
    iterator: str | None = None
    iterator_at: float = 0.0


class ShardProber:
    """Probes shards for waiting records, remembering iterators and answers between calls (driver only)."""

    def __init__(
        self, client_factory: Callable[[], Any], retry: RetryPolicy, interval_s: float, workers: int = WORKERS
    ):
        self._client_factory = client_factory
        self.workers = workers  # probes at a time (kinesis.checkNewRecordThreads)
        self._retry = retry
        self.interval_s = interval_s
        self._states: dict[str, _ShardState] = {}
        self._lock = threading.Lock()
        self.calls = 0  # GetRecords calls made (probes run on several threads), for tests and logs

    def probe(self, positions: Mapping[str, Position], bound_ms: int | None = None) -> dict[str, ProbeResult]:
        """A result per shard key; ``bound_ms``: a record that arrived after it does not count (AvailableNow)."""
        keys = sorted(positions)
        results = parallel_map(lambda key: self._probe_one(key, positions[key], bound_ms), keys, self.workers)
        return dict(zip(keys, results, strict=True))

    def forget(self, keep: set[str]) -> None:
        """Drop the state of shards no longer tracked."""
        for key in [key for key in self._states if key not in keep]:
            del self._states[key]

    def _probe_one(self, key: str, position: Position, bound_ms: int | None) -> ProbeResult:
        state = self._states.get(key)
        if state is None or state.position != position:
            state = self._states[key] = _ShardState(position)
        now = time.monotonic()
        if state.result is not None and (
            state.result.found is Found.SHARD_END or now - state.probed_at < self.interval_s * (1 - INTERVAL_SLACK)
        ):
            return state.result
        state.result = self._ask(key, state, now, bound_ms)
        state.probed_at = now
        return state.result

    def _ask(self, key: str, state: _ShardState, now: float, bound_ms: int | None) -> ProbeResult:
        stream, shard_id = split_shard_key(key)
        what = shard_label(stream, shard_id)
        kinesis = self._client_factory()
        for _attempt in range(2):  # a second time only after an expired iterator
            try:
                if state.iterator is None or now - state.iterator_at > ITERATOR_MAX_AGE_S:
                    state.iterator = open_iterator(kinesis, stream, shard_id, state.position, self._retry, what)
                    state.iterator_at = now
                with self._lock:
                    self.calls += 1
                answer = self._retry.call(
                    kinesis.get_records, ShardIterator=state.iterator, Limit=1, what=f"GetRecords (probe) on {what}"
                )
            except PositionGoneError as gone:
                return ProbeResult(Found.POSITION_GONE, error=str(gone))
            except ShardGoneError as gone:
                return ProbeResult(Found.SHARD_GONE, error=str(gone))
            except ClientError as exc:
                if error_code(exc) != "ExpiredIteratorException":
                    raise
                state.iterator = None
                continue
            return self._judge(state, answer, bound_ms)
        raise RuntimeError(f"GetRecords (probe) on {what}: a fresh shard iterator expired at once")

    @staticmethod
    def _judge(state: _ShardState, answer: dict[str, Any], bound_ms: int | None) -> ProbeResult:
        behind = answer.get("MillisBehindLatest")
        records = answer.get("Records") or []
        if records:
            state.iterator = None  # it moved past a record the batch has to read
            arrival = records[0].get("ApproximateArrivalTimestamp")
            arrival_ms = round(arrival.timestamp() * 1000) if arrival is not None else None
            late = bound_ms is not None and arrival_ms is not None and arrival_ms > bound_ms
            return ProbeResult(Found.NOTHING if late else Found.DATA, behind, arrival_ms)
        state.iterator = answer.get("NextShardIterator")
        if state.iterator is None:
            return ProbeResult(Found.SHARD_END, behind)
        if behind:  # nothing in this stretch, but records further on (AWS skips through old, empty stretches)
            return ProbeResult(Found.DATA, behind)
        return ProbeResult(Found.NOTHING, behind)
