"""``bench.common.preloaded_stream``: with ``balanced`` every shard holds the same number of records, so the quota
line of ``bench.source_throughput`` (shards x 2 MiB/s) is what a reader keeping the quotas can reach."""

from __future__ import annotations

from bench import common
from localaws import LocalServer
from localaws.streams import iterate_shard, list_shard_ids


def _per_shard(server: LocalServer, stream: str) -> list[int]:
    kinesis = server.client("kinesis")
    return [len(list(iterate_shard(kinesis, stream, shard_id))) for shard_id in list_shard_ids(kinesis, stream)]


def test_a_balanced_stream_holds_as_many_records_in_each_shard(kinesalite: LocalServer) -> None:
    kinesis = kinesalite.client("kinesis")
    balanced = common.preloaded_stream(kinesis, "bench-balanced", 4, 2000, 10, balanced=True)
    assert _per_shard(kinesalite, balanced) == [500] * 4
    keys = common.stream_keys(kinesis, balanced, 2000, balanced=True)
    assert len(set(keys)) == 4 * (common.KEYS // 4)  # as many keys as the hashed spread uses
    hashed = common.preloaded_stream(kinesis, "bench-hashed", 4, 2000, 10)
    assert sorted(_per_shard(kinesalite, hashed)) != [500] * 4  # spread by the keys' hash: uneven
