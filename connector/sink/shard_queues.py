"""The entries of one ``put_records.put_all`` run not stored yet, in one queue per pacing bucket (a shard's id when
the caller knows the stream's shard map, else the stream), pulled from the caller's iterable as the calls need
them. ``put_all`` makes one ``ShardQueues`` per run and sends from each queue's front what its
``pacing.WritePacer`` lets through, so a full shard's entries wait while the other shards' go; refused entries go
back to the front of their queue, which keeps each partition key's records in order across calls (docs/sink.md,
"At the write quota").
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import islice

from .entries import DEFAULT_LIMITS, MAX_ENTRIES_PER_CALL, Entry, RecordLimits, check_entry
from .pacing import ANY_SHARD

# The pacing bucket of an entry: its shard's id when the caller knows it, else ``pacing.ANY_SHARD``.
BucketOf = Callable[[Entry], str]
# How much of the caller's entries a put_all holds at most beyond what it sends: enough for every shard's next
# calls while a busier one is full, bounded for callers that stream their entries in.
LOOKAHEAD_BYTES = 64 * 1024 * 1024


def default_bucket(entry: Entry) -> str:
    """The pacing bucket of an entry when the caller has no shard map: the shard an aggregate was planned for,
    else the stream."""
    return getattr(entry, "shard_id", "") or ANY_SHARD


class ShardQueues:
    """The entries not stored yet, per pacing bucket and in order within each: a shard that is full does not hold
    back the others (a whole call's entries waiting for its busiest shard would hold each shard to the busiest
    one's pace).

    Each entry is checked (``check_entry``) as it is pulled, so an invalid entry raises before a call carries
    it, but after earlier calls were made.
    """

    def __init__(self, entries: Iterable[Entry], bucket_of: BucketOf, limits: RecordLimits = DEFAULT_LIMITS):
        self._source: Iterator[Entry] | None = iter(entries)
        self.bucket_of = bucket_of
        self.limits = limits
        self.queues: dict[str, deque[Entry]] = {}
        self.retries: dict[str, int] = {}  # refused entries at the front of a bucket: its next call carries only them
        self.count = 0
        self.bytes = 0

    def __len__(self) -> int:
        return self.count

    def fill(self) -> None:
        """Pull entries until every bucket holds a call's worth, or LOOKAHEAD_BYTES are held, or the source ends."""
        while self._source is not None and self.bytes < LOOKAHEAD_BYTES and not self._each_holds_a_call():
            entry = next(self._source, None)
            if entry is None:
                self._source = None
                return
            size = check_entry(entry, self.limits)
            self.queues.setdefault(self.bucket_of(entry), deque()).append(entry)
            self.count += 1
            self.bytes += size

    def _each_holds_a_call(self) -> bool:
        return bool(self.queues) and all(len(queue) >= MAX_ENTRIES_PER_CALL for queue in self.queues.values())

    def sendable(self) -> dict[str, Iterable[Entry]]:
        """Each bucket's entries a call may carry, in order: a bucket's refused entries go alone (a record sent
        after them could land before one refused twice), its others after."""
        return {
            key: islice(queue, self.retries[key]) if self.retries.get(key) else queue
            for key, queue in self.queues.items()
        }

    def take(self, counts: dict[str, int]) -> list[Entry]:
        """The first ``counts[bucket]`` entries of each bucket, out of the queues; the buckets that gave go last
        in the next plan (every shard gets the front of a call in turn). An emptied bucket stays known, so that
        ``fill`` pulls entries for it too."""
        taken: list[Entry] = []
        for key, count in counts.items():
            queue = self.queues.pop(key)
            taken += [queue.popleft() for _ in range(count)]
            self.queues[key] = queue
            self.retries[key] = max(0, self.retries.get(key, 0) - count)
        self.count -= len(taken)
        self.bytes -= sum(entry.size for entry in taken)
        return taken

    def put_back(self, refused: list[Entry]) -> None:
        """Entries a call did not store, back at the front of their buckets (they were sent first)."""
        for entry in reversed(refused):
            key = self.bucket_of(entry)
            self.queues.setdefault(key, deque()).appendleft(entry)
            self.retries[key] = self.retries.get(key, 0) + 1
            self.count += 1
            self.bytes += entry.size
