"""What the quota proxy must know to charge a call to the right shard, learned from the traffic and the server.

- ``IteratorMap``: a GetRecords call names only its shard iterator, which is opaque; the proxy maps each
  iterator it hands out (GetShardIterator's ShardIterator, GetRecords' NextShardIterator) to its shard.
- ``ShardRouter``: a write names a partition key (or ExplicitHashKey); the proxy routes it by MD5 against the
  open shards' hash-key ranges, listed from the server and listed again when the stream reshards (a reshard
  call through the proxy, or a server answer that put a record on another shard than predicted).
- ``CreatingConsumers``: the consumers registered through the proxy that the server still reports CREATING.

The proxy's own calls to the server (``ListShards``, ``DescribeStreamConsumer``) bypass the quotas and the
counts: they are the referee's, not a client's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from localaws.quota_model import HashRanges, ShardKey, hash_key

ITERATORS_KEPT = 200_000  # AWS iterators live 5 minutes; a long run hands out many more than it still uses


class IteratorMap:
    """Shard iterator -> the shard it reads, for the last ``capacity`` iterators learned (oldest dropped first)."""

    def __init__(self, capacity: int = ITERATORS_KEPT):
        self.capacity = capacity
        self._shards: dict[str, ShardKey] = {}
        self._lock = threading.Lock()

    def learn(self, iterator: str, shard: ShardKey) -> None:
        with self._lock:
            self._shards[iterator] = shard
            if len(self._shards) > self.capacity:
                del self._shards[next(iter(self._shards))]

    def shard_of(self, iterator: str) -> ShardKey | None:
        with self._lock:
            return self._shards.get(iterator)


class ShardRouter:
    """The shard a record goes to: ``shard_of(stream, partition_key, explicit_hash_key)``."""

    def __init__(self, upstream: Callable[[], Any]):
        self._upstream = upstream  # the proxy's own Kinesis client for the server
        self._ranges: dict[str, HashRanges] = {}
        self._lock = threading.Lock()

    def shard_of(self, stream: str, partition_key: str, explicit_hash_key: str | None = None) -> str | None:
        """None when the stream's shards cannot be listed (e.g. it does not exist: the server will say so)."""
        with self._lock:
            ranges = self._ranges.get(stream)
        if ranges is None:
            ranges = self._load(stream)
            if ranges is None:
                return None
        return ranges.shard_of(hash_key(partition_key, explicit_hash_key))

    def forget(self, stream: str) -> None:
        """List the stream's shards again before its next write (it resharded, or was deleted)."""
        with self._lock:
            self._ranges.pop(stream, None)

    def _load(self, stream: str) -> HashRanges | None:
        shards: list[dict] = []
        kwargs: dict[str, Any] = {"StreamName": stream}
        try:
            while True:
                answer = self._upstream().list_shards(**kwargs)
                shards += answer["Shards"]
                if not answer.get("NextToken"):
                    break
                kwargs = {"NextToken": answer["NextToken"]}
        except ClientError:
            return None
        ranges = HashRanges(shards)
        with self._lock:
            self._ranges[stream] = ranges
        return ranges


class CreatingConsumers:
    """Consumers registered through the proxy and not yet ACTIVE, asked of the server when counted."""

    def __init__(self, upstream: Callable[[], Any]):
        self._upstream = upstream
        self._arns: set[str] = set()
        self.lock = threading.Lock()  # held by the proxy from the count to the registration it allows

    def count(self) -> int:
        for arn in list(self._arns):
            try:
                status = self._upstream().describe_stream_consumer(ConsumerARN=arn)["ConsumerDescription"]
            except ClientError:  # gone
                self._arns.discard(arn)
                continue
            if status["ConsumerStatus"] != "CREATING":
                self._arns.discard(arn)
        return len(self._arns)

    def add(self, arn: str) -> None:
        self._arns.add(arn)
