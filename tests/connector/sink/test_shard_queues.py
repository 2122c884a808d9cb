"""``pyspark_aws_kinesis.sink.shard_queues.ShardQueues``: the entries of one ``put_all`` run not stored yet, one queue
per pacing bucket, pulled from the caller's entries as the calls need them; refused entries back at the front."""

from __future__ import annotations

import pytest

from pyspark_aws_kinesis.sink.entries import MAX_ENTRIES_PER_CALL, Entry
from pyspark_aws_kinesis.sink.pacing import ANY_SHARD
from pyspark_aws_kinesis.sink.shard_queues import ShardQueues, default_bucket


def _by_key(entry: Entry) -> str:
    return entry.partition_key


def _entries(*keys: str) -> list[Entry]:
    return [Entry(f"{i}".encode(), key) for i, key in enumerate(keys)]


def test_the_default_bucket_is_the_planned_shard_else_the_stream() -> None:
    class Aggregate(Entry):
        shard_id = "shardId-000000000003"

    assert default_bucket(Entry(b"x", "k")) == ANY_SHARD
    assert default_bucket(Aggregate(b"x", "k")) == "shardId-000000000003"


def test_entries_are_pulled_only_until_every_bucket_holds_a_call() -> None:
    pulled = []

    def source():
        for i in range(3 * MAX_ENTRIES_PER_CALL):
            pulled.append(i)
            yield Entry(b"x", "a")

    queues = ShardQueues(source(), _by_key)
    queues.fill()
    assert len(queues) == MAX_ENTRIES_PER_CALL == len(pulled)
    assert queues.bytes == MAX_ENTRIES_PER_CALL * 2


def test_each_bucket_keeps_its_entries_in_order_and_taken_ones_leave() -> None:
    entries = _entries("a", "b", "a", "b", "a")
    queues = ShardQueues(entries, _by_key)
    queues.fill()
    assert {key: list(queue) for key, queue in queues.sendable().items()} == {
        "a": [entries[0], entries[2], entries[4]],
        "b": [entries[1], entries[3]],
    }
    assert queues.take({"a": 2, "b": 1}) == [entries[0], entries[2], entries[1]]
    assert len(queues) == 2 and queues.bytes == sum(entry.size for entry in (entries[3], entries[4]))


def test_refused_entries_go_back_to_the_front_and_their_bucket_sends_them_alone() -> None:
    entries = _entries("a", "a", "a")
    queues = ShardQueues(entries, _by_key)
    queues.fill()
    sent = queues.take({"a": 2})
    queues.put_back([sent[1]])  # the second was refused, the first stored
    assert list(queues.sendable()["a"]) == [entries[1]]  # the retry alone: entries[2] must not overtake it
    assert queues.take({"a": 1}) == [entries[1]]
    assert list(queues.sendable()["a"]) == [entries[2]]


def test_an_invalid_entry_raises_when_pulled() -> None:
    queues = ShardQueues([Entry(b"x", "")], _by_key)
    with pytest.raises(ValueError, match="non-empty partition key"):
        queues.fill()
