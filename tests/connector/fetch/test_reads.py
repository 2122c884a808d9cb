"""``pyspark_aws_kinesis.fetch.reads.ShardRead``: where the next read of a shard starts, and its JSON form (as the
metadata store keeps it): old documents still load, new fields (the handed-on iterator, data loss) round-trip."""

from __future__ import annotations

from dataclasses import replace

from pyspark_aws_kinesis.fetch.reads import DataLossEvent, ShardRead
from pyspark_aws_kinesis.positions import AFTER_SEQUENCE_NUMBER, TRIM_HORIZON, WHOLE_RECORD, Position
from tests.connector.support.handoff_util import SHARD
from tests.connector.support.metadata_util import _read


def test_shard_reads_keep_the_iterator_and_old_documents_load_without_it() -> None:
    read = ShardRead("s", SHARD, Position(TRIM_HORIZON), 2, "5", next_iterator="it", iterator_ms=123)
    assert ShardRead.from_json(read.to_json()) == read
    old = replace(read, next_iterator=None, iterator_ms=None).to_json()
    assert "nextShardIterator" not in old and ShardRead.from_json(old).next_iterator is None
    assert read.same_range(replace(read, next_iterator="another"))  # a hint, not part of the range


def test_shard_read_next_start() -> None:
    assert _read().next_start() == Position(TRIM_HORIZON)
    assert _read(records=1, last="5").next_start() == Position(AFTER_SEQUENCE_NUMBER, "5", WHOLE_RECORD)
    inside = ShardRead("s", "shardId-0", Position(TRIM_HORIZON), 1, "5", 3, last_complete=False)
    assert inside.next_start() == Position(AFTER_SEQUENCE_NUMBER, "5", 3)
    assert ShardRead.from_json(inside.to_json()) == inside


def test_old_records_parse_and_new_fields_round_trip() -> None:
    old = {"stream": "s", "shardId": "shardId-1", "start": {"type": "TRIM_HORIZON"}, "records": 0}
    assert ShardRead.from_json(old) == ShardRead("s", "shardId-1", Position(TRIM_HORIZON), 0)
    lossy = replace(_read(), dropped_out_of_range=3, data_loss=DataLossEvent(Position(AFTER_SEQUENCE_NUMBER, "7"), "x"))
    assert ShardRead.from_json(lossy.to_json()) == lossy
    called = replace(_read(), call_starts_ms=(1_000, 1_250, 1_500))
    assert ShardRead.from_json(called.to_json()) == called and called.last_call_ms == 1_500
    recorded_before = {**old, "lastCallMs": 1_500}  # a read recorded when only its last call was kept
    assert ShardRead.from_json(recorded_before).call_starts_ms == (1_500,)
    paying = replace(called, paid_ms=4_000)
    assert ShardRead.from_json(paying.to_json()) == paying and ShardRead.from_json(called.to_json()).paid_ms is None
