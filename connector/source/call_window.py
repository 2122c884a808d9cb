"""Driver side: the query's GetRecords calls on each shard within the last second, as AWS counts a shard's calls, and
when the shard has paid back the bytes of the query's answers.

Who calls it: ``probe_turns`` and ``probe_deferral``, which ask whether a shard has room for one more of the query's
calls (``room_in``); ``probe.ShardProber``, which records its probes' calls and answers and those of batches' reads
the planner hears of (``ShardRead.call_starts_ms``, ``ShardRead.paid_ms``). The query keeps to ``calls_per_s`` of the
shard's 5 a second (4 by default), and calls no more while its answers are not paid back (a 5 MiB answer: 2.5 s):
docs/source.md, "What the source costs a shard" and "Reading at the shard's limit".
"""

from __future__ import annotations

import math
import threading
from collections import deque

from ..shard_calls import RATE_WINDOW_S, paid_back_at

# Older calls can never count again (a second of slack for a read's calls heard late): a shard planned from its reads
# keeps its last seconds' calls, not its history.
KEPT_S = RATE_WINDOW_S + 1.0


class ShardCallWindows:
    """Per shard key, when the query's calls on it started (monotonic seconds, with their wall-clock ms); calls
    older than the window are dropped as they are met. ``calls_per_s`` None: no limit is kept."""

    def __init__(self, calls_per_s: int | None):
        self.calls_per_s = calls_per_s
        self._calls: dict[str, deque[tuple[float, int]]] = {}
        self._paid: dict[str, float] = {}  # when the query's answers on each shard are paid back (monotonic s)
        self._lock = threading.Lock()  # probes of several shards run on several threads

    def called(self, key: str, at: float, wall_ms: int) -> None:
        """A call on ``key`` started at ``at`` (monotonic s), ``wall_ms`` on the wall clock."""
        with self._lock:
            self._add(key, at, wall_ms)

    def heard(self, key: str, at: float, wall_ms: int) -> None:
        """A call on ``key`` made elsewhere (a batch's read), unless it is one already counted: a read whose first
        page was a probe's answer names the probe's call."""
        with self._lock:
            if all(known_ms != wall_ms for _at, known_ms in self._calls.get(key, ())):
                self._add(key, at, wall_ms)

    def answered(self, key: str, started_at: float, answered_at: float, nbytes: int) -> None:
        """An answer of ``nbytes`` on ``key`` came at ``answered_at`` from a call started at ``started_at``
        (monotonic s): the shard pays it back (``shard_calls.paid_back_at``) before the query calls it again."""
        with self._lock:
            self._paid[key] = paid_back_at(self._paid.get(key, -math.inf), started_at, answered_at, nbytes)

    def paid_by(self, key: str, at: float) -> None:
        """A read elsewhere left the shard ``key`` paying back its answers until ``at`` (monotonic s)."""
        with self._lock:
            self._paid[key] = max(self._paid.get(key, -math.inf), at)

    def held(self, key: str) -> int:
        """How many calls on ``key`` are kept (those that may still count, and a few seconds more at most)."""
        return len(self._calls.get(key, ()))

    def count(self, key: str, now: float) -> int:
        """The query's calls on ``key`` that started within the last ``RATE_WINDOW_S``."""
        return len(self._starts(key, now))

    def room_in(self, key: str, now: float) -> float:
        """Seconds (and a ms) until the shard has room for one more of the query's calls: fewer than
        ``calls_per_s`` of them started within the last second, and the query's answers paid back; 0 when it has
        room now."""
        return max(self.unpaid_in(key, now), self.second_room_in(key, now))

    def second_room_in(self, key: str, now: float) -> float:
        """Seconds (and a ms) until the shard's second has room for one more of the query's calls: fewer than
        ``calls_per_s`` of them started within the last one; 0 when it has room now."""
        starts = self._starts(key, now)
        limit = self.calls_per_s
        if limit is None or len(starts) < limit:
            return 0.0
        return starts[len(starts) - limit] + RATE_WINDOW_S - now + 0.001

    def unpaid_in(self, key: str, now: float) -> float:
        """Seconds (and a ms) until the shard has paid back the query's answers on it; 0 when it has."""
        paying = self._paid.get(key, -math.inf) - now
        return paying + 0.001 if paying > 0 else 0.0

    def forget(self, keep: set[str]) -> None:
        """Drop the calls and debts of shards no longer tracked."""
        with self._lock:
            for key in [key for key in self._calls if key not in keep]:
                del self._calls[key]
            self._paid = {key: at for key, at in self._paid.items() if key in keep}

    def _add(self, key: str, at: float, wall_ms: int) -> None:
        calls = self._calls.setdefault(key, deque())
        calls.append((at, wall_ms))
        _drop_front(calls, at - KEPT_S)

    def _starts(self, key: str, now: float) -> list[float]:
        """When the calls on ``key`` within the window started, earliest first (a read's call may be heard of after
        a later probe's, so later ones are filtered)."""
        with self._lock:
            calls = self._calls.get(key)
            if not calls:
                return []
            _drop_front(calls, now - RATE_WINDOW_S)
            return sorted(at for at, _wall in calls if at > now - RATE_WINDOW_S)


def _drop_front(calls: deque[tuple[float, int]], until: float) -> None:
    """Drop the calls at the front that started at ``until`` or before; one heard of late, behind a later call,
    goes once it reaches the front."""
    while calls and calls[0][0] <= until:
        calls.popleft()
