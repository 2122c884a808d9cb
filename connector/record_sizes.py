"""What a shard's GetRecords answers may hold: the shard's read quota and the mean size of its records.

Both halves size calls with it: the executors' polling reads (``fetch.polling``) and the driver's probes
(``source.probe``), so it sits below both.
"""

from __future__ import annotations

from collections.abc import Container, Hashable
from typing import Generic, TypeVar

ShardT = TypeVar("ShardT", bound=Hashable)  # how a shard is named: (stream, shard id), or a shard key
SHARD_READ_BYTES_PER_S = 2 * 1024 * 1024  # GetRecords bytes per second per shard, shared by its readers (AWS)


class RecordSizes(Generic[ShardT]):
    """The mean size of each shard's records, learnt from its answers (for sizing ``Limit``): each answer weighs as
    much as the history before it, so a change of record size is followed within a few answers."""

    def __init__(self) -> None:
        self._sizes: dict[ShardT, float] = {}

    def get(self, shard: ShardT) -> float | None:
        return self._sizes.get(shard)

    def learn(self, shard: ShardT, records: int, nbytes: int) -> None:
        """An answer of ``records`` records and ``nbytes`` bytes came for ``shard`` (an empty one teaches nothing)."""
        if records > 0:
            size, before = nbytes / records, self._sizes.get(shard)
            self._sizes[shard] = size if before is None else (before + size) / 2

    def keep_only(self, shards: Container[ShardT]) -> None:
        """Forget the shards not in ``shards`` (no longer read: a reshard's parents)."""
        for shard in [shard for shard in self._sizes if shard not in shards]:
            del self._sizes[shard]

    def forget(self, shard: ShardT) -> None:
        self._sizes.pop(shard, None)


def sized_limit(budget_bytes: float, record_bytes: float | None, first: int, cap: int) -> int:
    """``Limit`` for one call: as many records of ``record_bytes`` as fit in ``budget_bytes`` (``first`` while the
    size is unknown), never below 1 nor above ``cap`` (the options' Limit, at most AWS's 10,000)."""
    if record_bytes is None:
        return max(1, min(first, cap))
    return max(1, min(cap, int(budget_bytes // max(record_bytes, 1.0))))
