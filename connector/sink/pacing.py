"""Writing at a shard's quota without hammering it: what the stream took in the last second, and when it has room.

Kinesis takes 1,000 records and 1 MiB a second per shard, shared by every writer, in a sliding second; beyond
that PutRecords refuses single entries with ``ProvisionedThroughputExceededException``. ``put_records.put_all``
keeps one ``WritePacer`` per call sequence (the generator one per sending thread) and asks it, before each
PutRecords call, how many of the pending entries to send and how long to wait first:

- **What was taken**: every stored entry is remembered for one second, in a *bucket*: the shard an aggregate was
  planned for (``AggregateEntry.shard_id``), else one bucket for all plain entries (their shard is unknown before
  the answer; their keys spread them over the shards, so the bucket stands for the stream).
- **The budget** of a bucket is learned from refusals: when the stream refuses an entry for throughput, what the
  bucket stored in the last second is what the shard (or stream) takes from us now, other writers included.
- **Pacing**: a call carries the longest prefix of the pending entries that fits the budgets (order kept); when
  not even the first fits, the pacer waits until the oldest write of its bucket leaves the second, i.e. until the
  shard has paid it back. So at the quota there is about one call a second per shard, refused only when the
  budget changed; never a busy retry. A bucket with nothing in its last second always takes one entry.
- **Probing**: 5 s after a bucket's last refusal it may go 10 % over its budget, and what the stream then takes
  becomes the budget: a budget learned while a neighbour wrote, or before a reshard, grows back.

A write counts from the moment its answer came: the stream admitted it before, so the wait for its payback never
ends early (waiting from the call's start was refused again when the request took long to arrive), and costs at
most the call's latency a second.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

WINDOW_S = 1.0  # Kinesis's write quotas are per second
PROBE_AFTER_S = 5.0
PROBE_HEADROOM = 1.1
ANY_SHARD = "*"  # the bucket of entries whose shard is not known before the answer


class Sized(Protocol):
    @property
    def size(self) -> int: ...


@dataclass
class _Bucket:
    """Our stored writes of the last second to one shard (or to the stream), and the budget learned for it."""

    writes: deque[tuple[float, int, int]] = field(default_factory=deque)  # (answered at, records, bytes)
    records: int = 0
    bytes: int = 0
    budget: tuple[int, int] | None = None  # (records, bytes) a second; None until the stream refused us
    refused_at: float = -float("inf")

    def expire(self, now: float) -> None:
        while self.writes and self.writes[0][0] + WINDOW_S <= now:
            _, records, nbytes = self.writes.popleft()
            self.records -= records
            self.bytes -= nbytes

    def room_for(self, records: int, nbytes: int, now: float) -> bool:
        """Whether ``records`` more entries of ``nbytes`` fit in this second (an empty second takes one)."""
        if self.budget is None or (self.records == 0 and records == 1):
            return True
        headroom = PROBE_HEADROOM if now - self.refused_at >= PROBE_AFTER_S else 1.0
        budget_records, budget_bytes = self.budget
        # Either measure under the budget will do: the refusal did not say which one was spent.
        return self.records + records <= budget_records * headroom or self.bytes + nbytes <= budget_bytes * headroom

    def wait_s(self, now: float) -> float:
        """Until the oldest write of the second is paid back."""
        if not self.writes:
            return 0.0
        return max(0.0, self.writes[0][0] + WINDOW_S - now)


class WritePacer:
    """Per call sequence (not thread-safe): ``plan`` before a call, ``record`` after its answer."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self.waited_s = 0.0  # time spent waiting for the stream to have room (for the counts)

    def plan(self, pending: Sequence[Sized], bucket_of: Callable[[Sized], str]) -> tuple[int, float]:
        """How many of ``pending`` to send now; (0, seconds) when not even the first fits: wait, then plan again."""
        now = self.clock()
        for bucket in self._buckets.values():
            bucket.expire(now)
        taken: dict[str, tuple[int, int]] = {}
        for count, entry in enumerate(pending):
            key = bucket_of(entry)
            bucket = self._buckets.get(key)
            records, nbytes = taken.get(key, (0, 0))
            if bucket is not None and not bucket.room_for(records + 1, nbytes + entry.size, now):
                return (count, 0.0) if count else (0, max(bucket.wait_s(now), 0.001))
            taken[key] = (records + 1, nbytes + entry.size)
        return len(pending), 0.0

    def record(self, stored: dict[str, tuple[int, int]], refused: set[str]) -> None:
        """A call just answered stored ``stored`` (records, bytes per bucket); the stream refused entries of the
        buckets in ``refused`` for throughput: their budget is what they took in the last second."""
        now = self.clock()
        for key, (records, nbytes) in stored.items():
            bucket = self._buckets.setdefault(key, _Bucket())
            bucket.writes.append((now, records, nbytes))
            bucket.records += records
            bucket.bytes += nbytes
        for key, bucket in self._buckets.items():
            bucket.expire(now)
            if key in refused and bucket.records:
                bucket.budget = (bucket.records, bucket.bytes)
                bucket.refused_at = now
            elif key not in refused and bucket.budget is not None and key in stored:
                # Took more than the budget without a refusal (a probe): the stream takes that much now.
                budget_records, budget_bytes = bucket.budget
                bucket.budget = (max(budget_records, bucket.records), max(budget_bytes, bucket.bytes))
        for key in refused - self._buckets.keys():
            self._buckets[key] = _Bucket(refused_at=now)  # refused with nothing of ours in its second

    def knows(self, key: str) -> bool:
        """Whether the bucket has writes of ours in its last second (a refusal then has a payback to wait for)."""
        bucket = self._buckets.get(key)
        return bucket is not None and bucket.records > 0
