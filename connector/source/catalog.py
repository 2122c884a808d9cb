"""The driver's view of each stream's shards: listings cached and refreshed cheaply, and the lineage of reshards.

Who calls it: ``planner`` (every trigger: which shards exist, their hash ranges) and ``batch_reader`` (the
shards a batch read covers). ``track_listing`` folds a new listing into the shards a query tracks: new shards
(the children of a split or merge) are tracked with their tracked parents, so that they are read only after
their parents are read to their end (``offsets.is_readable``); finished shards that ListShards no longer shows
are forgotten; unfinished ones that vanished are reported (``kinesis.failOnDataLoss``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, MutableMapping
from typing import Any

from ..positions import Position, shard_key, split_shard_key
from ..retry import RetryPolicy
from ..shards import MAX_HASH_KEY, Shard, list_shards

FULL_LISTING_S = 60.0  # ShardCatalog lists every shard at least this often, only new ones in between


def track_listing(
    positions: MutableMapping[str, Position],
    parents: MutableMapping[str, tuple[str, ...]],
    stream: str,
    listing: Iterable[Shard],
    start_of: Callable[[Shard], Position],
) -> dict[str, Position]:
    """Fold ``stream``'s ``listing`` into the tracked ``positions`` and ``parents`` (both updated in place).

    A shard seen for the first time starts at ``start_of(shard)`` and records which of its parents are tracked.
    A tracked shard missing from the listing is forgotten; those that were not finished (records possibly lost)
    are returned with their positions. Parents that are no longer tracked are dropped from ``parents``.
    """
    listed = {shard_key(stream, shard.shard_id): shard for shard in listing}
    new = [key for key in listed if key not in positions]
    for key in new:  # positions first, so that a new child sees its new parent
        positions[key] = start_of(listed[key])
    for key in new:
        shard = listed[key]
        tracked = tuple(
            shard_key(stream, parent)
            for parent in (shard.parent_shard_id, shard.adjacent_parent_shard_id)
            if parent and shard_key(stream, parent) in positions
        )
        if tracked:
            parents[key] = tracked
    # The set difference first: tracked keys are walked (in order) and split only when some shard is unlisted.
    unlisted = positions.keys() - listed.keys()
    gone = [key for key in positions if key in unlisted and split_shard_key(key)[0] == stream] if unlisted else []
    vanished = {key: positions[key] for key in gone if not positions[key].is_shard_end}
    for key in gone:
        del positions[key]
    for key, tracked in list(parents.items()):
        kept = tuple(parent for parent in tracked if parent in positions)
        if key not in positions or not kept:
            del parents[key]
        elif kept != tracked:
            parents[key] = kept
    return vanished


class ShardCatalog:
    """The driver's view of each stream's shards, listed at most once per ``min_interval_s`` per stream.

    A listing between two full ones asks only for shards after the last shard id known (ListShards'
    ExclusiveStartShardId; a reshard's children get new, higher ids): one call instead of one per 1,000 shards,
    and nothing to parse when nothing changed. A full listing (``fresh``, the first, and at least every
    ``full_interval_s``) also drops shards that expired and refreshes closed shards' ending sequence numbers.
    Hash-key ranges never change for a shard id, so ``hash_range`` answers from any listing since the last full one
    (which forgets expired shards: the cache holds the shards listed, however many reshards a long run sees).
    Holds no client (it is pickled with the reader): ``client_factory`` gives the process's client.
    """

    def __init__(
        self,
        client_factory: Any,
        retry: RetryPolicy,
        min_interval_s: float = 1.0,
        full_interval_s: float = FULL_LISTING_S,
    ):
        self._client_factory = client_factory
        self._retry = retry
        self._min_interval_s = min_interval_s
        self._full_interval_s = max(full_interval_s, min_interval_s)
        self._listed: dict[str, tuple[float, list[Shard]]] = {}
        self._full_at: dict[str, float] = {}
        self._by_key: dict[tuple[str, str], Shard] = {}
        self._last_id: dict[str, str] = {}  # the highest shard id listed per stream, where the next listing starts

    def shards(self, stream: str, fresh: bool = False) -> list[Shard]:
        """The stream's shards, from a listing at most ``min_interval_s`` old (``fresh``: a full listing now)."""
        now = time.monotonic()
        cached = self._listed.get(stream)
        if cached is not None and not fresh and now - cached[0] < self._min_interval_s:
            return cached[1]
        if cached is None or fresh or not cached[1] or now - self._full_at[stream] >= self._full_interval_s:
            shards = new = list_shards(self._client_factory(), stream, self._retry)
            self._full_at[stream] = now
            # shards past the retention leave the cache too: reshards over months must not grow it
            self._by_key = {key: shard for key, shard in self._by_key.items() if key[0] != stream}
            self._last_id[stream] = max((shard.shard_id for shard in shards), default="")
        else:
            last = self._last_id[stream]
            listed = list_shards(self._client_factory(), stream, self._retry, after_shard_id=last)
            new = [shard for shard in listed if shard.shard_id > last]  # some servers list all
            shards = cached[1] + new if new else cached[1]  # the same list while nothing is new
            self._last_id[stream] = max((shard.shard_id for shard in new), default=last)
        self._listed[stream] = (now, shards)
        self._by_key.update(((stream, shard.shard_id), shard) for shard in new)
        return shards

    def hash_range(self, stream: str, shard_id: str) -> tuple[int, int]:
        """The shard's hash-key range; the whole space for a shard the last full listing no longer showed
        (expired: it has no records left to check against the range)."""
        shard = self._by_key.get((stream, shard_id))
        if shard is None:
            self.shards(stream, fresh=True)
            shard = self._by_key.get((stream, shard_id))
        return (shard.starting_hash_key, shard.ending_hash_key) if shard else (0, MAX_HASH_KEY)
