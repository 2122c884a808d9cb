"""Helpers for the sink's unit tests: entries, shard maps and routers."""

from __future__ import annotations

from pyspark_aws_kinesis.shards import MAX_HASH_KEY, Shard
from pyspark_aws_kinesis.sink.entries import Entry
from pyspark_aws_kinesis.sink.routing import ShardRouter


def _entries(count: int, size: int = 10, keys: int = 7) -> list[Entry]:
    return [Entry(f"{i:0{size}d}".encode(), f"key-{i % keys}") for i in range(count)]


def shard(number: int, low: int, high: int, closed: bool = False) -> Shard:
    return Shard(f"shardId-{number:012d}", None, None, low, high, "0", "9" if closed else None)


def router(*ranges: tuple[int, int]) -> ShardRouter:
    return ShardRouter(shard(number, low, high) for number, (low, high) in enumerate(ranges))


QUARTER = 2**128 // 4
FOUR_SHARDS = router(*[(i * QUARTER, (i + 1) * QUARTER - 1 if i < 3 else MAX_HASH_KEY) for i in range(4)])


SHARD_0, SHARD_1 = "shardId-000000000000", "shardId-000000000001"
