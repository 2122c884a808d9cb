"""Which shard takes which record: the stream's shard map as a task listed it.

``pyspark_aws_kinesis.sink.task`` lists the open shards once per task and stream when aggregating
(``open_shard_router``) and again when a PutRecords answer shows that an aggregate landed on a shard the listing did not
expect (a split or merge in between). ``pyspark_aws_kinesis.sink.planning`` routes each user record with
``ShardRouter.shard_of``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from botocore.exceptions import ClientError

from ..kpl import hash_key_of
from ..retry import RetryPolicy, error_code
from ..shards import Shard, list_shards, open_shards, shard_for_hash_key
from .entries import Entry
from .settings import SinkSettings


class ShardRouter:
    """A listing of the stream's shards: routes hash keys to its open shards, and knows every listed range.

    Open shards are numbered 0..n-1 in hash-key order; ``shard_of`` answers with that number (the planner keeps
    one Aggregator per number), ``shard_id`` turns it back into the shard's id.
    """

    def __init__(self, listing: Iterable[Shard]):
        listed = list(listing)
        self._open = open_shards(listed)
        if not self._open:
            raise ValueError("a stream with no open shard cannot take records")
        self._starts = [shard.starting_hash_key for shard in self._open]
        self._number = {shard.shard_id: number for number, shard in enumerate(self._open)}
        self._by_id = {shard.shard_id: shard for shard in listed}

    def __len__(self) -> int:
        return len(self._open)

    def shard_of(self, hash_key: int) -> int:
        """The number of the open shard whose range holds ``hash_key``; ValueError if none does."""
        return self._number[shard_for_hash_key(self._open, hash_key, self._starts).shard_id]

    def shard_id(self, number: int) -> str:
        return self._open[number].shard_id

    def listed(self, shard_id: str) -> Shard | None:
        """The listed shard (open or closed) with this id, None when the listing does not show it."""
        return self._by_id.get(shard_id)


MAX_REMEMBERED_KEYS = 65_536  # partition keys whose shard is remembered (~100 B each); past that the memo starts over


class ShardBuckets:
    """The pacing bucket of each entry (``put_records.put_all``'s ``bucket_of``): the id of the shard it goes to, as
    Kinesis routes it (the planned shard of an aggregate; else ExplicitHashKey, or the MD5 of the partition key,
    once per key: keys repeat a lot). The memo of keys is bounded: the generator routes for as long as it runs, and
    its default keys are random, one per record."""

    def __init__(self, router: ShardRouter):
        self._router = router
        self._shard_of_key: dict[str, str] = {}

    def __call__(self, entry: Entry) -> str:
        planned = getattr(entry, "shard_id", "")
        if planned:
            return planned
        router = self._router
        if entry.explicit_hash_key is not None:
            return router.shard_id(router.shard_of(int(entry.explicit_hash_key)))
        found = self._shard_of_key.get(entry.partition_key)
        if found is None:
            if len(self._shard_of_key) >= MAX_REMEMBERED_KEYS:
                self._shard_of_key.clear()
            found = self._shard_of_key[entry.partition_key] = router.shard_id(
                router.shard_of(hash_key_of(entry.partition_key))
            )
        return found

    @property
    def remembered(self) -> int:
        """How many partition keys' shards are remembered."""
        return len(self._shard_of_key)


def shard_buckets(router: ShardRouter) -> ShardBuckets:
    """``ShardBuckets`` of ``router``'s shards."""
    return ShardBuckets(router)


def open_shard_router(client: Any, stream: str, settings: SinkSettings) -> ShardRouter:
    """The stream's shards, listed now (aggregation only).

    A missing stream raises pyspark_aws_kinesis.shards.StreamNotFoundError (it names the stream); denied access is
    turned into a PermissionError that says which permission aggregation needs and how to do without it.
    """
    try:
        shards = list_shards(client, stream, settings.retry)
    except ClientError as exc:
        if error_code(exc) not in ("AccessDeniedException", "UnrecognizedClientException"):
            raise
        raise PermissionError(
            f"ListShards on Kinesis stream '{stream}' was refused ({error_code(exc)}) at "
            f"{settings.client.where()}: with kinesis.sink.aggregationEnabled=true the sink needs kinesis:ListShards "
            f"as well as kinesis:PutRecords on the stream (or set kinesis.sink.aggregationEnabled=false)"
        ) from exc
    return ShardRouter(shards)


def plain_shard_router(client: Any, stream: str) -> ShardRouter | None:
    """The stream's shards for pacing plain records per shard (``shard_buckets``), or None when they cannot be
    listed: plain writes need no kinesis:ListShards, and a missing stream or a broken endpoint is for the
    PutRecords calls to report (one attempt here, so a failing listing costs no backoff)."""
    try:
        return ShardRouter(list_shards(client, stream, RetryPolicy(max_retries=0)))
    except Exception:  # the listing only helps the pacing: whatever went wrong, write without it
        return None
