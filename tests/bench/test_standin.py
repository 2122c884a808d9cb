"""The in-process Kinesis of the driver benchmarks answers as AWS does where the driver depends on it: paging and
ExclusiveStartShardId, a closed shard's end (no NextShardIterator, its ChildShards), the retention and iterator
expiry. Its shapes are recorded from the session's kinesalite."""

from __future__ import annotations

import random
import time

import pytest
from botocore.exceptions import ClientError

from bench.standin import ITERATOR_LIFE_S, NOWHERE, StandIn, reshard
from localaws.servers import LocalServer, aws_client


@pytest.fixture
def standin(kinesalite: LocalServer):
    standin = StandIn.recorded(kinesalite.client("kinesis"))
    client = aws_client("kinesis", NOWHERE.endpoint_url)
    standin.hook(client)
    return standin, client


def read_all(client, stream: str, shard_id: str) -> tuple[list[str], dict]:
    """Every record's data from TRIM_HORIZON to the tip (or the end), and the last answer."""
    iterator = client.get_shard_iterator(StreamName=stream, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON")
    iterator, seen = iterator["ShardIterator"], []
    while True:
        answer = client.get_records(ShardIterator=iterator, Limit=2)
        seen += [record["Data"].decode() for record in answer["Records"]]
        iterator = answer.get("NextShardIterator")
        if iterator is None or not answer["Records"]:
            return seen, answer


def test_listing_pages_and_starts_after_a_shard_id(standin) -> None:
    fake, client = standin
    fake.create("s", 5)
    first = client.list_shards(StreamName="s", MaxResults=2)
    rest = client.list_shards(NextToken=first["NextToken"], MaxResults=2)
    after = client.list_shards(StreamName="s", ExclusiveStartShardId="shardId-000000000002")
    assert [s["ShardId"][-1] for s in first["Shards"]] == ["0", "1"]
    assert [s["ShardId"][-1] for s in rest["Shards"]] == ["2", "3"] and "NextToken" in rest
    assert [s["ShardId"][-1] for s in after["Shards"]] == ["3", "4"]


def test_a_split_shard_ends_with_its_children_and_they_hold_what_came_after(standin) -> None:
    fake, client = standin
    fake.create("s", 1)
    parent = fake.streams["s"].shards[0]
    for data in ("a", "b", "c"):
        fake.put("s", parent, data.encode())
    left, right = fake.split("s", parent)
    fake.put("s", right, b"d")
    seen, last = read_all(client, "s", parent.shard_id)
    assert seen == ["a", "b", "c"] and "NextShardIterator" not in last
    assert {child["ShardId"] for child in last["ChildShards"]} == {left.shard_id, right.shard_id}
    listed = {s["ShardId"]: s for s in client.list_shards(StreamName="s")["Shards"]}
    assert "EndingSequenceNumber" in listed[parent.shard_id]["SequenceNumberRange"]
    assert listed[right.shard_id]["ParentShardId"] == parent.shard_id
    ending = int(listed[parent.shard_id]["SequenceNumberRange"]["EndingSequenceNumber"])
    assert int(listed[right.shard_id]["SequenceNumberRange"]["StartingSequenceNumber"]) > ending
    assert read_all(client, "s", right.shard_id)[0] == ["d"]


def test_a_merge_opens_one_child_over_both_parents(standin) -> None:
    fake, client = standin
    fake.create("s", 2)
    reshard(fake, "s", split=False, rng=random.Random(1))
    listed = client.list_shards(StreamName="s")["Shards"]
    child = listed[-1]
    assert (child["ParentShardId"], child["AdjacentParentShardId"]) == ("shardId-000000000000", "shardId-000000000001")
    assert child["HashKeyRange"]["StartingHashKey"] == "0"
    assert [s["ShardId"] for s in listed if "EndingSequenceNumber" not in s["SequenceNumberRange"]] == [
        child["ShardId"]
    ]


def test_records_and_closed_shards_leave_after_the_retention(standin, monkeypatch) -> None:
    fake, client = standin
    fake.create("s", 1, retention_s=60)
    parent = fake.streams["s"].shards[0]
    fake.put("s", parent, b"old")
    fake.split("s", parent)
    now = time.time()
    monkeypatch.setattr(time, "time", lambda: now + 61)
    assert fake.expire("s") == 1
    assert [s["ShardId"] for s in client.list_shards(StreamName="s")["Shards"]] == [
        "shardId-000000000001",
        "shardId-000000000002",
    ]
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        client.get_shard_iterator(StreamName="s", ShardId=parent.shard_id, ShardIteratorType="TRIM_HORIZON")


def test_an_iterator_expires_after_five_minutes(standin, monkeypatch) -> None:
    fake, client = standin
    fake.create("s", 1)
    iterator = client.get_shard_iterator(StreamName="s", ShardId="shardId-000000000000", ShardIteratorType="LATEST")
    now = time.time()
    monkeypatch.setattr(time, "time", lambda: now + ITERATOR_LIFE_S + 1)
    with pytest.raises(ClientError, match="ExpiredIteratorException"):
        client.get_records(ShardIterator=iterator["ShardIterator"])
