"""``pyspark_aws_kinesis.source.planner``: a record cap split fairly over shards (the remainder rotating), and shards
grouped into partitions."""

from __future__ import annotations

import pytest

from localaws import LocalServer
from localaws.streams import put_records
from pyspark_aws_kinesis.source.planner import fair_shares
from tests.connector.support.source_util import payloads, read_all, reader, roundtrip, source_options


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


def test_shards_are_grouped_into_partitions(kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    stream = lite_stream(shards=3)
    produced = [f"r{i}".encode() for i in range(30)]
    put_records(kinesalite.client("kinesis"), stream, [(data, f"k{i}") for i, data in enumerate(produced)])
    source = reader(source_options(kinesalite, stream, tmp_path, **{"kinesis.shardsPerPartition": "2"}))
    start = roundtrip(source.initialOffset())
    partitions = list(source.partitions(start, roundtrip(source.latestOffset(start, None))))
    assert [len(partition.tasks) for partition in partitions] == [2, 1]
    assert sorted(payloads(read_all(source, partitions))) == sorted(produced)
