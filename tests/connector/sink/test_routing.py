"""``pyspark_aws_kinesis.sink.routing``: the router finds each shard and its edges, and plain writes pace by shard when
the shards can be listed (and write without the listing otherwise). Each partition key's shard remembered within a
bound: test_pacing.py."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from pyspark_aws_kinesis.shards import MAX_HASH_KEY
from pyspark_aws_kinesis.sink.entries import Entry
from pyspark_aws_kinesis.sink.routing import ShardRouter, plain_shard_router, shard_buckets
from tests.connector.sink.shard_map_util import FOUR_SHARDS, QUARTER, SHARD_0, SHARD_1, router, shard
from tests.connector.support.write_sim import listing


def test_router_finds_each_shard_and_its_edges() -> None:
    assert [FOUR_SHARDS.shard_of(k) for k in (0, QUARTER - 1, QUARTER, 2**128 - 1)] == [0, 0, 1, 3]
    with pytest.raises(ValueError, match="outside every open shard"):
        router((0, 10), (20, 30)).shard_of(15)
    with pytest.raises(ValueError, match="no open shard"):
        ShardRouter([shard(0, 0, MAX_HASH_KEY, closed=True)])


class _DeniedListing:
    def list_shards(self, **kwargs: object) -> dict:
        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "ListShards")


def test_plain_writes_pace_by_shard_when_the_shards_can_be_listed_and_write_without_the_listing_otherwise() -> None:
    """Plain writes need only kinesis:PutRecords: a refused listing leaves the stream as one bucket."""
    assert plain_shard_router(_DeniedListing(), "s") is None
    listed = plain_shard_router(type("Listing", (), {"list_shards": lambda self, **kw: {"Shards": listing(2)}})(), "s")
    assert listed is not None and shard_buckets(listed)(Entry(b"x", "key-1")) in (SHARD_0, SHARD_1)
