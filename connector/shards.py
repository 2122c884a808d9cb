"""A stream's shards as ListShards describes them: listing (paging, a clear error for a missing stream) and
hash-key routing.

Who calls it: the source's driver side (``source.catalog``, which caches listings and tracks lineage), the sink
when it routes aggregates to shards (``sink.routing``) and the load generator (``kinesis_generator.sender``).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from .errors import KinesisConnectorError
from .retry import RetryPolicy, error_code
from .stream_ids import stream_option, stream_param

MAX_HASH_KEY = 2**128 - 1


class StreamNotFoundError(KinesisConnectorError, ValueError):
    """The stream named in ``kinesis.streamName`` does not exist at the endpoint."""


@dataclass(frozen=True)
class Shard:
    """One shard as ListShards describes it (hash keys as ints; sequence numbers as decimal strings)."""

    shard_id: str
    parent_shard_id: str | None
    adjacent_parent_shard_id: str | None
    starting_hash_key: int
    ending_hash_key: int
    starting_sequence_number: str
    ending_sequence_number: str | None

    @property
    def is_open(self) -> bool:
        """True while the shard takes writes (a closed shard has an ending sequence number)."""
        return self.ending_sequence_number is None

    def holds_hash_key(self, hash_key: int) -> bool:
        return self.starting_hash_key <= hash_key <= self.ending_hash_key

    @classmethod
    def from_api(cls, shard: dict[str, Any]) -> Shard:
        """From one entry of a ListShards answer."""
        hash_range = shard["HashKeyRange"]
        sequence_range = shard["SequenceNumberRange"]
        return cls(
            shard_id=shard["ShardId"],
            parent_shard_id=shard.get("ParentShardId"),
            adjacent_parent_shard_id=shard.get("AdjacentParentShardId"),
            starting_hash_key=int(hash_range["StartingHashKey"]),
            ending_hash_key=int(hash_range["EndingHashKey"]),
            starting_sequence_number=sequence_range["StartingSequenceNumber"],
            ending_sequence_number=sequence_range.get("EndingSequenceNumber"),
        )


def list_shards(
    kinesis_client: Any,
    stream_name: str,
    retry: RetryPolicy | None = None,
    page_size: int | None = None,
    after_shard_id: str | None = None,
) -> list[Shard]:
    """Every shard of ``stream_name`` (open and closed), following NextToken paging, in ListShards order.

    Raises StreamNotFoundError when the stream does not exist; throttling and 5xx are retried by ``retry``.
    ``page_size`` (MaxResults) is for tests of the paging; AWS's default page is 1000 shards.
    ``after_shard_id``: only the shards listed after it (ListShards' ExclusiveStartShardId; shard ids grow).
    """
    policy = retry or RetryPolicy()
    shards: list[Shard] = []
    page: dict[str, Any] = {"MaxResults": page_size} if page_size else {}
    after = {"ExclusiveStartShardId": after_shard_id} if after_shard_id else {}
    kwargs: dict[str, Any] = {**stream_param(stream_name), **after, **page}
    while True:
        try:
            answer = policy.call(kinesis_client.list_shards, what=f"ListShards of stream '{stream_name}'", **kwargs)
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                endpoint = getattr(getattr(kinesis_client, "meta", None), "endpoint_url", "?")
                region = getattr(getattr(kinesis_client, "meta", None), "region_name", "?")
                raise StreamNotFoundError(
                    f"Kinesis stream '{stream_name}' (option {stream_option((stream_name,))}) does not exist at "
                    f"endpoint {endpoint} in region {region}"
                ) from None
            raise
        shards.extend(Shard.from_api(shard) for shard in answer["Shards"])
        token = answer.get("NextToken")
        if not token:
            return shards
        # With NextToken, ListShards refuses StreamName (and StreamARN).
        kwargs = {"NextToken": token, **page}


def open_shards(shards: Iterable[Shard]) -> list[Shard]:
    """The shards that take writes, sorted by starting hash key."""
    return sorted((shard for shard in shards if shard.is_open), key=lambda shard: shard.starting_hash_key)


def shard_for_hash_key(sorted_open: list[Shard], hash_key: int, starts: Sequence[int] | None = None) -> Shard:
    """The open shard (from ``open_shards``) whose hash-key range holds ``hash_key``; ValueError if none.

    ``starts``: the shards' starting hash keys, for callers that look up many keys in one listing (the sink).
    """
    if starts is None:
        starts = [shard.starting_hash_key for shard in sorted_open]
    index = bisect.bisect_right(starts, hash_key) - 1
    if index < 0 or not sorted_open[index].holds_hash_key(hash_key):
        raise ValueError(f"hash key {hash_key} is outside every open shard's range (is the stream resharding?)")
    return sorted_open[index]
