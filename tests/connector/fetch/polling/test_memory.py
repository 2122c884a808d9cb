"""``pyspark_aws_kinesis.fetch.polling.memory.ShardMemory``: what a process remembers of each shard stays bounded,
over reshards too, and keeps the shards being read."""

from __future__ import annotations

from pyspark_aws_kinesis.fetch.polling.memory import ShardMemory


def test_the_shard_memory_forgets_the_shard_read_longest_ago_beyond_its_bound() -> None:
    memory = ShardMemory(max_shards=3)
    first, second, third, child = (("s", f"shardId-{i}") for i in range(4))
    for paid_ms, shard in enumerate((first, second, third)):
        memory.learn(shard, records=10, nbytes=1000 * (paid_ms + 1), paid_ms=paid_ms)
    memory.called(first, 100)  # read again: now the one read last
    memory.learn(child, records=1, nbytes=50, paid_ms=4)  # a reshard's child: the one read longest ago goes
    assert len(memory) == 3
    assert (memory.size(second), memory.paid_ms(second), memory.called_ms(second)) == (None, None, None)
    assert (memory.size(first), memory.paid_ms(first), memory.called_ms(first)) == (100.0, 0, 100)
    assert (memory.size(third), memory.size(child)) == (300.0, 50.0)


def test_the_shard_memory_stays_bounded_over_reshards_and_keeps_the_shards_being_read() -> None:
    memory = ShardMemory(max_shards=20)
    for generation in range(100):  # 100 reshards of a 10-shard stream, each read for 3 batches
        shards = [("s", f"shardId-{generation:03d}-{i}") for i in range(10)]
        for batch in range(3):
            for shard in shards:
                memory.called(shard, generation * 10 + batch)
                memory.learn(shard, records=1, nbytes=100, paid_ms=generation * 10 + batch)
        assert len(memory) <= 20
        assert all(memory.paid_ms(shard) == generation * 10 + 2 for shard in shards)
