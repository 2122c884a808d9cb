"""``pyspark_aws_kinesis.source.batch_reader.KinesisBatchReader``, driven as Spark drives it (no Spark): the range a
batch read fixes at planning, its partitions, and a start that would make it empty refused. The shards of a
partition read side by side: test_side_by_side.py; in Spark: tests/connector/queries/test_source.py."""

from __future__ import annotations

import json

import pytest

from localaws import LocalServer
from pyspark_aws_kinesis.clock import now_ms
from pyspark_aws_kinesis.options import OptionError
from pyspark_aws_kinesis.positions import AT_TIMESTAMP, TRIM_HORIZON
from pyspark_aws_kinesis.source import batch_reader
from pyspark_aws_kinesis.source.batch_reader import BatchPartition, KinesisBatchReader
from tests.connector.support.source_util import put_numbered, source_options


def _reader(options: dict[str, str]) -> KinesisBatchReader:
    return KinesisBatchReader(None, {key.lower(): value for key, value in options.items()})  # type: ignore[arg-type]


@pytest.mark.parametrize("start", ["LATEST", '{"shardId-000000000000": {"type": "LATEST"}}'])
def test_a_start_at_latest_is_refused_naming_the_option(start: str) -> None:
    options = {"kinesis.streamName": "s", "kinesis.region": "us-east-1", "kinesis.startingPosition": start}
    with pytest.raises(OptionError, match=r"kinesis\.startingPosition=LATEST makes a batch read empty"):
        _reader(options)


def test_without_a_start_a_batch_read_starts_at_the_oldest_record() -> None:
    reader = _reader({"kinesis.streamName": "s", "kinesis.region": "us-east-1"})
    assert reader.starting.default.kind == TRIM_HORIZON
    given = _reader(
        {
            "kinesis.streamName": "s",
            "kinesis.region": "us-east-1",
            "kinesis.startingPosition": "AT_TIMESTAMP:2026-11-22T08:00:00+00:00",
        }
    )
    assert given.starting.default.kind == AT_TIMESTAMP


def test_every_shard_is_read_up_to_what_had_arrived_at_planning(kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    stream = lite_stream(shards=3)
    options = source_options(kinesalite, stream, tmp_path, **{"kinesis.shardsPerPartition": "2"})
    before = now_ms()
    partitions = _reader(options).partitions()
    assert [len(p.tasks) for p in partitions] == [2, 1]
    assert all(isinstance(p, BatchPartition) and before <= p.stop_after_ms <= now_ms() for p in partitions)
    tasks = [task for p in partitions for task, end in p.tasks]
    assert sorted(task.shard_id for task in tasks) == [f"shardId-00000000000{i}" for i in range(3)]
    assert {task.start.kind for task in tasks} == {TRIM_HORIZON}
    assert all(end is None for p in partitions for _, end in p.tasks)


def test_an_end_map_reads_only_the_shards_it_names_up_to_their_end(
    kinesalite: LocalServer, lite_stream, tmp_path
) -> None:
    stream = lite_stream(shards=2)
    put_numbered(kinesalite, stream, "r", 4)
    last = kinesalite.client("kinesis").list_shards(StreamName=stream)["Shards"][1]
    end = {last["ShardId"]: {"type": "AT_SEQUENCE_NUMBER", "sequenceNumber": "123", "subSequenceNumber": 2}}
    options = source_options(kinesalite, stream, tmp_path, **{"kinesis.endingPosition": json.dumps(end)})
    (partition,) = _reader(options).partitions()
    assert partition.stop_after_ms is None
    ((task, shard_end),) = partition.tasks
    assert task.shard_id == last["ShardId"]
    assert (shard_end.sequence_number, shard_end.sub_sequence_number) == ("123", 2)


def test_a_partition_reads_its_shards_range(kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    stream = lite_stream(shards=1)
    produced = put_numbered(kinesalite, stream, "r", 5)
    reader = _reader(source_options(kinesalite, stream, tmp_path))
    (partition,) = reader.partitions()
    put_numbered(kinesalite, stream, "late", 2)  # arrived after planning: not in the range
    rows = [row for batch in reader.read(partition) for row in batch.to_pylist()]
    assert [bytes(row["data"]) for row in rows] == produced


def test_a_partition_hands_back_freed_memory_once_its_last_row_is_taken(
    kinesalite: LocalServer, lite_stream, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reused Python worker would otherwise keep the high-water mark of its largest read
    (tests/connector/test_freed_memory.py)."""
    releases: list[int] = []
    monkeypatch.setattr(batch_reader, "release_freed_memory", lambda: releases.append(1))
    stream = lite_stream(shards=1)
    put_numbered(kinesalite, stream, "r", 3)
    reader = _reader(source_options(kinesalite, stream, tmp_path))
    (partition,) = reader.partitions()
    batches = reader.read(partition)
    assert next(batches).num_rows == 3 and not releases
    assert next(batches, None) is None and releases == [1]
