"""Writing at a shard's quota without hammering it: our share of each shard, and when it has room for more.

Who calls it: ``put_records.put_all``, which keeps one ``WritePacer`` per call sequence (the generator one per
sending thread) and asks it before each PutRecords call which pending entries to send and how long to wait first.
Our writes of the last second are counted per shard (``routing.shard_buckets``; one ``ANY_SHARD`` bucket when the
caller does not route) from a learned point of each call's round trip (``lag``), against a budget that starts at
the quota and follows AIMD when others fill the shard; when nothing fits the pacer waits until the shard has paid
back our oldest write, never a busy retry. The rules and their measurements: docs/sink.md, "At the write quota".
"""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

WINDOW_S = 1.0  # Kinesis's write quotas are per second
SHARD_QUOTA = (1000, 1024 * 1024)  # records, bytes a second per shard (AWS's, provisioned and on-demand alike)
DECREASE = 0.9  # the budget after a refusal, of what it was
INCREASE = 0.2  # of the quota (the stream bucket: of its first take): the first step of growth, doubling after
# each second without refusal in which the budget held entries back
LAG_START, LAG_MIN, LAG_MAX = 0.5, 0.05, 1.0  # where in a call's round trip its writes count from
# Steps of ``lag`` (parts of a round trip): earlier after a second without refusal, later after a refusal that
# our own writes explain
LAG_EARLIER, LAG_LATER = 0.1, 0.25
# At most this share of a shard's second in one call: smaller calls lose less of each second to the count, and leave
# other writers turns (docs/sink.md, "At the write quota").
CALL_SHARE = 0.25
FULL = 0.98  # our writes that fill this much of a shard's quota explain its refusal
ANY_SHARD = "*"  # the bucket of entries whose shard is not known before the answer


class Sized(Protocol):
    @property
    def size(self) -> int: ...


@dataclass
class _Bucket:
    """Our stored writes of the last second to one shard (or to the stream), and our budget on it."""

    quota: tuple[int, int] | None  # the shard's quota; None for the stream bucket
    writes: deque[tuple[float, float, int, int]] = field(default_factory=deque)  # (stamp, answered, records, bytes)
    records: int = 0
    bytes: int = 0
    share: float | None = None  # budget as a fraction of ``limit``; None: no refusal yet (the quota applies)
    limit: tuple[int, int] | None = None  # what ``share`` is a fraction of: the quota, or the stream's first take
    decreased_at: float = -float("inf")
    changed_at: float = -float("inf")
    blocked_until: float = -float("inf")  # after a refusal: until the shard has paid back a write of ours
    step: float = INCREASE  # the next increase of ``share``: doubles with each second used without refusal
    held_back: bool = False  # whether the budget kept entries back since it last changed
    oldest: float | None = None  # the stamp of the oldest write counted in the last second

    def __post_init__(self) -> None:
        self.limit = self.quota

    def expire(self, now: float) -> None:
        """Count the writes whose stamp is in the last second; keep the others until their answer is two seconds
        old (``ours_fill`` looks at the ones answered within a second before a call that is under way)."""
        while self.writes and self.writes[0][1] + 2 * WINDOW_S <= now:
            self.writes.popleft()
        counted = [write for write in self.writes if write[0] + WINDOW_S > now]
        self.oldest = counted[0][0] if counted else None
        self.records = sum(write[2] for write in counted)
        self.bytes = sum(write[3] for write in counted)

    def ours_fill(self, sent_at: float) -> bool:
        """Whether our own writes can explain a refusal of a call sent at ``sent_at``: the ones the stream may still
        have counted when the call arrived (answered less than a second before it was sent), this call's stored
        part included, fill the shard's quota."""
        if self.quota is None:
            return False
        records = sum(w[2] for w in self.writes if w[1] + WINDOW_S > sent_at)
        nbytes = sum(w[3] for w in self.writes if w[1] + WINDOW_S > sent_at)
        return records >= FULL * self.quota[0] or nbytes >= FULL * self.quota[1]

    def budget(self) -> tuple[float, float] | None:
        if self.limit is None:
            return None
        share = 1.0 if self.share is None else self.share
        return self.limit[0] * share, self.limit[1] * share

    def room_for(self, records: int, nbytes: int, now: float) -> bool:
        """Whether ``records`` more entries of ``nbytes`` fit in this second (an empty second takes one)."""
        if now < self.blocked_until:
            return False
        if self.records == 0 and records == 1:
            return True
        budget = self.budget()
        if budget is None or (self.records + records <= budget[0] and self.bytes + nbytes <= budget[1]):
            return True
        self.held_back = True
        return False

    def call_full(self, records: int, nbytes: int) -> bool:
        """Whether ``records`` entries of ``nbytes`` are more than a call may carry of this shard's second
        (``CALL_SHARE``; a first entry always goes)."""
        if self.quota is None or records <= 1:
            return False
        return records > CALL_SHARE * self.quota[0] or nbytes > CALL_SHARE * self.quota[1]

    def wait_s(self, now: float) -> float:
        """Until the bucket is no longer blocked and the oldest write of the second is paid back."""
        paid_back = self.oldest + WINDOW_S if self.oldest is not None else now
        return max(0.0, self.blocked_until - now, paid_back - now)

    def refused(self, now: float, rng: random.Random, ours: bool) -> None:
        """The stream refused entries of this bucket for throughput: nothing more until the shard has paid back
        our oldest write of the second (with none, other writers fill it: a jittered part of a second lets
        writers take turns); and, unless our own writes fill the shard (``ours``: the pacer's stamp was early),
        the budget shrinks, once a second."""
        if self.oldest is not None:
            self.blocked_until = self.oldest + WINDOW_S
        else:
            self.blocked_until = now + rng.uniform(0.5, 1.0) * WINDOW_S
        if ours:
            return
        if self.limit is None:  # the stream bucket's first refusal: what it took is its budget
            self.limit, self.share = (max(1, self.records), max(1, self.bytes)), 1.0
        elif now - self.decreased_at >= WINDOW_S:
            self.share = DECREASE * (1.0 if self.share is None else self.share)
            self.step = INCREASE
        else:
            return
        self.decreased_at = self.changed_at = now
        self.held_back = False

    def answered(self, now: float) -> None:
        """A call stored entries of this bucket without a refusal: grow the budget after a second in which it
        kept entries back (a budget we do not fill says nothing about what the shard takes)."""
        if self.share is None or not self.held_back or now - self.changed_at < WINDOW_S:
            return
        self.share += self.step
        self.step *= 2
        if self.quota is not None:
            self.share = min(self.share, 1.0)
        self.changed_at = now
        self.held_back = False


class WritePacer:
    """Per call sequence (not thread-safe): ``plan`` before a call, ``record`` after its answer."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, rng: random.Random | None = None):
        self.clock = clock
        self.rng = rng or random.Random()  # the jitter of turns on a shard that others fill
        self.lag = LAG_START  # where in a call's round trip its writes count from (module doc: stamps)
        self._lag_changed_at: float | None = None  # None until the first answer
        self._buckets: dict[str, _Bucket] = {}
        self.waited_s = 0.0  # time spent waiting for the stream to have room (for the counts)

    def _bucket(self, key: str) -> _Bucket:
        found = self._buckets.get(key)
        if found is None:
            found = self._buckets[key] = _Bucket(None if key == ANY_SHARD else SHARD_QUOTA)
        return found

    def plan(
        self, pending: Mapping[str, Iterable[Sized]], max_entries: int, max_bytes: int
    ) -> tuple[dict[str, int], float]:
        """How many entries to send from the front of each bucket's ``pending`` (at most ``max_entries`` and
        ``max_bytes`` in all); ({}, seconds) when none fits: wait, then plan again."""
        now = self.clock()
        for bucket in self._buckets.values():
            bucket.expire(now)
        taken: dict[str, int] = {}
        entries, nbytes = 0, 0
        full: list[str] = []
        for key, queue in pending.items():
            bucket, records, size = self._bucket(key), 0, 0
            for entry in queue:
                if (
                    entries == max_entries
                    or nbytes + entry.size > max_bytes
                    or bucket.call_full(records + 1, size + entry.size)
                ):
                    break
                if not bucket.room_for(records + 1, size + entry.size, now):
                    full.append(key)
                    break
                records, size, entries, nbytes = records + 1, size + entry.size, entries + 1, nbytes + entry.size
            if records:
                taken[key] = records
        if taken or not full:
            return taken, 0.0
        return {}, max(min(self._buckets[key].wait_s(now) for key in full), 0.001)

    def budget(self, key: str) -> tuple[float, float] | None:
        """Our budget on a bucket's shard (records, bytes a second); None while unbounded."""
        return self._bucket(key).budget()

    def record(self, stored: dict[str, tuple[int, int]], refused: set[str], sent_at: float | None = None) -> None:
        """A call made at ``sent_at`` (default: now) just answered: it stored ``stored`` (records, bytes per
        bucket); the stream refused entries of the buckets in ``refused`` for throughput."""
        now = self.clock()
        sent_at = now if sent_at is None else sent_at
        stamp = sent_at + (now - sent_at) * self.lag
        for key, (records, nbytes) in stored.items():
            self._bucket(key).writes.append((stamp, now, records, nbytes))
        early = False  # whether a refusal says our stamps were early
        for key in stored.keys() | refused:
            bucket = self._bucket(key)
            bucket.expire(now)
            if key in refused:
                ours = bucket.ours_fill(sent_at)
                early = early or ours
                bucket.refused(now, self.rng, ours)
            else:
                bucket.answered(now)
        self._learn_lag(now, early)

    def _learn_lag(self, now: float, early: bool) -> None:
        """Count writes from later in the round trip after a refusal our own writes explain, a little earlier after
        each second without one (module doc: stamps)."""
        if early:
            self.lag = min(LAG_MAX, self.lag + LAG_LATER)
        elif self._lag_changed_at is not None and now - self._lag_changed_at >= WINDOW_S:
            self.lag = max(LAG_MIN, self.lag - LAG_EARLIER)
        elif self._lag_changed_at is not None:
            return
        self._lag_changed_at = now
