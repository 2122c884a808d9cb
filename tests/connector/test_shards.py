"""shards: ListShards paging on kinesis-mock, the Shard record, a missing stream's clear error, lineage tracking
and the fair split of a record cap over shards."""

from __future__ import annotations

import pytest

from localaws import LocalServer
from localaws.streams import list_shard_ids
from pyspark_aws_kinesis.positions import LATEST, SHARD_END, TRIM_HORIZON, Position
from pyspark_aws_kinesis.retry import RetryPolicy
from pyspark_aws_kinesis.shards import (
    MAX_HASH_KEY,
    Shard,
    StreamNotFoundError,
    list_shards,
    open_shards,
    shard_for_hash_key,
)
from pyspark_aws_kinesis.source.catalog import track_listing
from pyspark_aws_kinesis.source.offsets import KinesisOffset
from pyspark_aws_kinesis.source.planner import fair_shares


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


def _shard(shard_id: str, parent: str | None = None, adjacent: str | None = None, closed: bool = False) -> Shard:
    return Shard(shard_id, parent, adjacent, 0, 10, "1", "9" if closed else None)


def test_lineage_children_wait_for_every_tracked_parent() -> None:
    # s0 split into s2 + s3, then s3 merged with s1 into s4.
    listing = [
        _shard("s0", closed=True),
        _shard("s1", closed=True),
        _shard("s2", "s0"),
        _shard("s3", "s0", closed=True),
        _shard("s4", "s3", "s1"),
    ]
    positions: dict[str, Position] = {}
    parents: dict[str, tuple[str, ...]] = {}
    assert track_listing(positions, parents, "st", listing, lambda _s: Position(TRIM_HORIZON)) == {}
    assert parents == {"st/s2": ("st/s0",), "st/s3": ("st/s0",), "st/s4": ("st/s3", "st/s1")}
    offset = KinesisOffset("src", "/m", 0, positions, parents)
    assert offset.readable() == ["st/s0", "st/s1"]
    positions["st/s0"] = Position(SHARD_END)
    assert KinesisOffset("src", "/m", 0, positions, parents).readable() == ["st/s1", "st/s2", "st/s3"]
    positions["st/s3"] = Position(SHARD_END)
    assert "st/s4" not in KinesisOffset("src", "/m", 0, positions, parents).readable()  # s1 is not finished
    positions["st/s1"] = Position(SHARD_END)
    assert KinesisOffset("src", "/m", 0, positions, parents).readable() == ["st/s2", "st/s4"]


def test_lineage_forgets_expired_shards_and_reports_vanished_ones() -> None:
    positions = {"st/s0": Position(SHARD_END), "st/s1": Position(TRIM_HORIZON), "other/s0": Position(TRIM_HORIZON)}
    parents = {"st/s2": ("st/s0",)}
    positions["st/s2"] = Position(TRIM_HORIZON)
    vanished = track_listing(positions, parents, "st", [_shard("s2", "s0"), _shard("s3")], lambda _s: Position(LATEST))
    assert vanished == {"st/s1": Position(TRIM_HORIZON)}  # unfinished and gone: records may be lost
    # s0 finished and expired: forgotten, and no longer a parent; s3 is new; the other stream is untouched.
    assert positions == {"st/s2": Position(TRIM_HORIZON), "st/s3": Position(LATEST), "other/s0": Position(TRIM_HORIZON)}
    assert parents == {}


def test_a_shard_seen_again_after_it_finished_is_not_read_again() -> None:
    positions = {"st/s0": Position(SHARD_END)}
    parents: dict[str, tuple[str, ...]] = {}
    track_listing(positions, parents, "st", [_shard("s0", closed=True)], lambda _s: Position(TRIM_HORIZON))
    assert positions == {"st/s0": Position(SHARD_END)}


@pytest.mark.parametrize(
    ("max_rows", "batch_id", "caps"),
    [
        (None, 0, {}),
        (10, 0, {"a": 4, "b": 3, "c": 3}),
        (10, 1, {"b": 4, "c": 3, "a": 3}),  # the remainder rotates with the batch
        (2, 0, {"a": 1, "b": 1}),
        (2, 2, {"c": 1, "a": 1}),  # fewer rows than shards: the shards take turns
    ],
)
def test_fair_shares_split_the_cap_and_rotate_the_remainder(max_rows, batch_id, caps) -> None:
    got_caps, reads = fair_shares(["a", "b", "c"], max_rows, batch_id)
    assert got_caps == caps
    assert reads == (sorted(caps) if caps else ["a", "b", "c"])
    assert sum(got_caps.values()) == (max_rows or 0)
