"""Helpers for the reshard tests (polling and enhanced fan-out): splits and merges on kinesis-mock, and the check that
every record came once and in its key's order."""

from __future__ import annotations

import time
from typing import Any

from localaws.streams import wait_for_stream_active

KEYS = [f"key-{index}" for index in range(6)]


def check_once_and_in_key_order(rows: list[dict[str, Any]], produced: list[bytes]) -> None:
    read = [bytes(row["data"]) for row in rows]
    assert sorted(read) == sorted(produced), "every record exactly once"
    assert len(read) == len(set(read))
    for key in KEYS:
        rounds = [int(item.split(b":")[1]) for item in read if item.startswith(key.encode() + b":")]
        assert rounds == sorted(rounds), f"{key}'s records out of order: {rounds}"


def split(kinesis: Any, stream: str, shard) -> None:
    middle = (shard.starting_hash_key + shard.ending_hash_key) // 2
    kinesis.split_shard(StreamName=stream, ShardToSplit=shard.shard_id, NewStartingHashKey=str(middle))
    time.sleep(0.2)  # kinesis-mock takes 100 ms and reports ACTIVE before it starts
    wait_for_stream_active(kinesis, stream)


def merge(kinesis: Any, stream: str, low, high) -> None:
    kinesis.merge_shards(StreamName=stream, ShardToMerge=low.shard_id, AdjacentShardToMerge=high.shard_id)
    time.sleep(0.2)
    wait_for_stream_active(kinesis, stream)
