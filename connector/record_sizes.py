"""What a shard's GetRecords answers may hold: the shard's read quota and the mean size of its records.

Both halves size calls with it: the executors' polling reads (``fetch.polling``) and the driver's probes
(``source.probe``), so it sits below both.
"""

from __future__ import annotations

from collections.abc import Container, Hashable, Iterable
from typing import Generic, TypeVar

ShardT = TypeVar("ShardT", bound=Hashable)  # how a shard is named: (stream, shard id), or a shard key
SHARD_READ_BYTES_PER_S = 2 * 1024 * 1024  # GetRecords bytes per second per shard, shared by its readers (AWS)


LARGE_RECORD_BYTES = 1024 * 1024  # larger records are "large" (AWS): only a stream raised above 1 MiB holds them
# The large records' share is counted over about this many records (each record weighs half as much this many later).
LARGE_SHARE_HALF_LIFE = 500


class RecordSizes(Generic[ShardT]):
    """What each shard's records weigh, learnt from its answers (for sizing ``Limit``): the mean size of the records
    of up to 1 MiB, each answer weighing as much as the history before it (a change of size is followed within a
    few answers), and the share of large records among all. A rare large record does not shrink ``Limit`` for the
    small ones around it: it is counted in the share (docs/source.md, "Large records")."""

    def __init__(self) -> None:
        self._sizes: dict[ShardT, float] = {}
        self._large: dict[ShardT, tuple[float, float]] = {}  # (large records, records), weighted by recency
        self._only_large: set[ShardT] = set()  # shards whose size so far is of large records alone

    def get(self, shard: ShardT) -> float | None:
        return self._sizes.get(shard)

    def large_share(self, shard: ShardT) -> float:
        large, records = self._large.get(shard, (0.0, 0.0))
        return large / records if records else 0.0

    def learn(self, shard: ShardT, records: int, nbytes: int, large: tuple[int, int] = (0, 0)) -> None:
        """An answer of ``records`` records and ``nbytes`` bytes came for ``shard``, ``large`` = (count, bytes) of
        them over ``LARGE_RECORD_BYTES`` (an empty one teaches nothing)."""
        if records <= 0:
            return
        large_count, large_bytes = large
        if large_count or shard in self._large:
            seen_large, seen = self._large.get(shard, (0.0, 0.0))
            fade = 0.5 ** (records / LARGE_SHARE_HALF_LIFE)
            self._large[shard] = (seen_large * fade + large_count, seen * fade + records)
        if records > large_count:
            size, before = (nbytes - large_bytes) / (records - large_count), self._sizes.get(shard)
            first = before is None or shard in self._only_large
            self._sizes[shard] = size if first else (before + size) / 2
            self._only_large.discard(shard)
        elif shard not in self._sizes:
            self._sizes[shard] = nbytes / records  # only large ones so far: until a small one comes
            self._only_large.add(shard)

    def keep_only(self, shards: Container[ShardT]) -> None:
        """Forget the shards not in ``shards`` (no longer read: a reshard's parents)."""
        for shard in [shard for shard in self._sizes if shard not in shards]:
            self.forget(shard)

    def forget(self, shard: ShardT) -> None:
        self._sizes.pop(shard, None)
        self._large.pop(shard, None)
        self._only_large.discard(shard)


def large_records(sizes: Iterable[int], nbytes: int) -> tuple[int, int]:
    """(count, bytes) of the records over ``LARGE_RECORD_BYTES`` among ``sizes`` (an answer's records, whose
    ``nbytes`` in all tell at once when none can be)."""
    if nbytes <= LARGE_RECORD_BYTES:
        return 0, 0
    large = [size for size in sizes if size > LARGE_RECORD_BYTES]
    return len(large), sum(large)


def sized_limit(budget_bytes: float, record_bytes: float | None, first: int, cap: int, large_share: float = 0.0) -> int:
    """``Limit`` for one call: as many records of ``record_bytes`` as fit in ``budget_bytes`` (``first`` while the
    size is unknown), never below 1 nor above ``cap`` (the options' Limit, at most AWS's 10,000); with a share of
    large records, at most as many as hold one of them on average (an answer of two is up to 10 MiB: the shard's
    next 5 s)."""
    if record_bytes is None:
        return max(1, min(first, cap))
    limit = min(cap, int(budget_bytes // max(record_bytes, 1.0)))
    if large_share > 0:
        limit = min(limit, int(1 / large_share))
    return max(1, limit)
