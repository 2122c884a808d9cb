"""What this process remembers of each shard it read with GetRecords, for its next read: the records' mean size
(each call's ``Limit``), when the last call started and when the answers are paid back. Who calls it:
``polling.transport.GetRecordsTransport``, through the process-wide ``SHARD_MEMORY``.
"""

from __future__ import annotations

import threading

from ...record_sizes import RecordSizes


class ShardMemory:
    """What this process's reads of a shard learnt for the next read of it: the mean size of its records (for
    sizing ``Limit``), when their last call started and when the shard has paid back their answers (wall clock,
    ms: the next micro-batch's read keeps the interval and waits for the pay-back instead of being refused).

    Process-wide (one entry per stream and shard, shared by the reads of successive micro-batches in a reused
    Python worker, and by the read-ahead thread): a batch's first call then needs no small probing ``Limit``.
    Bounded for a long run's reshards: beyond ``max_shards`` the shard read longest ago is forgotten, never one
    still being read."""

    MAX_SHARDS = 10_000

    def __init__(self, max_shards: int = MAX_SHARDS) -> None:
        self.max_shards = max_shards
        self._sizes: RecordSizes[tuple[str, str]] = RecordSizes()
        self._paid_ms: dict[tuple[str, str], int] = {}
        self._called_ms: dict[tuple[str, str], int] = {}
        self._recent: dict[tuple[str, str], None] = {}  # every shard remembered, the one read longest ago first
        self._lock = threading.Lock()  # the read-ahead thread and the reader both tell

    def size(self, shard: tuple[str, str]) -> float | None:
        return self._sizes.get(shard)

    def paid_ms(self, shard: tuple[str, str]) -> int | None:
        return self._paid_ms.get(shard)

    def called_ms(self, shard: tuple[str, str]) -> int | None:
        return self._called_ms.get(shard)

    def __len__(self) -> int:
        return len(self._recent)

    def called(self, shard: tuple[str, str], at_ms: int) -> None:
        """A GetRecords on ``shard`` started at ``at_ms``."""
        with self._lock:
            self._called_ms[shard] = max(at_ms, self._called_ms.get(shard, at_ms))
            self._touched(shard)

    def large_share(self, shard: tuple[str, str]) -> float:
        return self._sizes.large_share(shard)

    def learn(
        self, shard: tuple[str, str], records: int, nbytes: int, paid_ms: int, large: tuple[int, int] = (0, 0)
    ) -> None:
        """An answer of ``records`` records and ``nbytes`` bytes (``large``: count and bytes of those over 1 MiB)
        came for ``shard``, paid back at ``paid_ms`` (empty answers teach no size)."""
        with self._lock:
            self._paid_ms[shard] = max(paid_ms, self._paid_ms.get(shard, paid_ms))
            self._sizes.learn(shard, records, nbytes, large)
            self._touched(shard)

    def _touched(self, shard: tuple[str, str]) -> None:
        self._recent.pop(shard, None)
        self._recent[shard] = None
        while len(self._recent) > self.max_shards:
            oldest = next(iter(self._recent))
            del self._recent[oldest]
            self._paid_ms.pop(oldest, None)
            self._called_ms.pop(oldest, None)
            self._sizes.forget(oldest)


SHARD_MEMORY = ShardMemory()
