"""shards: ListShards paging on kinesis-mock, the Shard record and hash-key lookup, a missing stream's clear error."""

from __future__ import annotations

import pytest

from localaws import LocalServer
from localaws.streams import list_shard_ids
from pyspark_aws_kinesis.retry import RetryPolicy
from pyspark_aws_kinesis.shards import (
    MAX_HASH_KEY,
    Shard,
    StreamNotFoundError,
    list_shards,
    open_shards,
    shard_for_hash_key,
)


def test_list_shards_follows_paging(kinesis_mock: LocalServer, mock_stream) -> None:
    kinesis = kinesis_mock.client("kinesis")
    stream = mock_stream(shards=3)
    shards = list_shards(kinesis, stream, page_size=1)
    assert [shard.shard_id for shard in shards] == list_shard_ids(kinesis, stream)
    assert len(shards) == 3 and all(shard.is_open for shard in shards)
    ordered = open_shards(shards)
    assert ordered[0].starting_hash_key == 0 and ordered[-1].ending_hash_key == MAX_HASH_KEY
    assert shard_for_hash_key(ordered, MAX_HASH_KEY) == ordered[-1]


def test_missing_stream_is_a_clear_error(kinesis_mock: LocalServer) -> None:
    with pytest.raises(StreamNotFoundError, match=r"stream 'no-such-stream' \(option kinesis.streamName\) does not"):
        list_shards(kinesis_mock.client("kinesis"), "no-such-stream", RetryPolicy(0, 0, 0))


def test_closed_shard_and_hash_lookup() -> None:
    closed = Shard("shardId-1", None, None, 0, 10, "1", "9")
    open_one = Shard("shardId-2", "shardId-1", None, 0, 10, "10", None)
    assert not closed.is_open and open_one.is_open
    assert open_shards([closed, open_one]) == [open_one]
    with pytest.raises(ValueError, match="outside every open shard"):
        shard_for_hash_key([open_one], 11)
