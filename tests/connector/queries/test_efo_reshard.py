"""A split and a merge while a query reads over enhanced fan-out (kinesis-mock): every record exactly once, each
partition key's records in the order they were written, and a child shard read only after its parents' last batch.

Two shapes of a closed shard's subscription, both met on AWS-compatible servers:
- ``aws``: the subscription ends with an event without ContinuationSequenceNumber (AWS's shard end; the fault
  proxy's ``shard_ends`` turns kinesis-mock's events into it): the read records the shard's end when the event
  reaches it, else the probe below does;
- ``kinesis-mock``: the subscription never ends, it only sends empty events at the tip: the read stops caught up,
  and the planner learns the end from its GetRecords probe (NextShardIterator absent), as for any caught-up shard.
"""

from __future__ import annotations

from typing import Any

import pytest

from localaws import LocalServer
from localaws.fault_proxy import FaultProxy, Faults
from localaws.streams import put_records
from pyspark_aws_kinesis.fetch.reads import STOP_CAUGHT_UP, STOP_SHARD_END
from pyspark_aws_kinesis.positions import SHARD_END, split_shard_key
from pyspark_aws_kinesis.shards import list_shards, open_shards
from pyspark_aws_kinesis.source.offsets import parse_offset
from tests.connector.queries.reshard_util import KEYS, check_once_and_in_key_order, merge, split
from tests.connector.support.efo_util import efo_options
from tests.connector.support.source_util import next_batch, reader, roundtrip

pytestmark = pytest.mark.slow  # kinesis-mock refuses a resubscription to a consumer+shard for ~5 s


def put_rounds(kinesis: Any, stream: str, rounds: range) -> list[bytes]:
    """One record per key per round (``key:n``), in order; returns their data."""
    batch = [(f"{key}:{n}".encode(), key) for n in rounds for key in KEYS]
    put_records(kinesis, stream, batch)
    return [data for data, _key in batch]


def last_stops(source, offsets: list[dict], shard_ids: set[str]) -> dict[str, str]:
    """How each shard's last recorded read stopped (``ShardRead.stop``), over the batches ``offsets`` planned."""
    stops: dict[str, str] = {}
    for offset in offsets:
        parsed = parse_offset(offset)
        store = source.settings.metadata_store(parsed.metadata_path)
        keys = [split_shard_key(key) for key in parsed.active()]
        for (_stream, shard_id), read in store.get_shard_reads(parsed.source_id, parsed.batch_id, keys).items():
            if shard_id in shard_ids and read is not None:
                stops[shard_id] = read.stop
    return stops


@pytest.mark.parametrize("shape", ["aws", "kinesis-mock"])
def test_split_and_merge_while_reading_over_efo(kinesis_mock: LocalServer, mock_stream, tmp_path, shape: str) -> None:
    stream = mock_stream(shards=1)
    kinesis = kinesis_mock.client("kinesis")
    with FaultProxy(kinesis_mock.endpoint_url) as proxy:
        source = reader(efo_options(proxy, stream, tmp_path / "meta"))
        start = roundtrip(source.initialOffset())
        produced = put_rounds(kinesis, stream, range(2))
        start, rows = next_batch(source, start)  # the query reads the parent while it is open
        batches, offsets = [rows], [start]
        # The query falls behind: the parent holds a backlog when it is split, its children when they merge.
        produced += put_rounds(kinesis, stream, range(2, 4))
        (parent,) = list_shards(kinesis, stream)
        split(kinesis, stream, parent)
        produced += put_rounds(kinesis, stream, range(4, 6))
        low, high = open_shards(list_shards(kinesis, stream))
        merge(kinesis, stream, low, high)
        produced += put_rounds(kinesis, stream, range(6, 8))
        closed = {parent.shard_id, low.shard_id, high.shard_id}
        if shape == "aws":
            proxy.faults = Faults(shard_ends=frozenset(closed))
        while True:  # each batch's offset, to look up its reads
            try:
                start, rows = next_batch(source, start, timeout_s=3.0)
            except AssertionError:
                break
            batches.append(rows)
            offsets.append(start)

    rows = [row for batch in batches for row in batch]
    check_once_and_in_key_order(rows, produced)
    parent_batches = [i for i, batch in enumerate(batches) if any(r["shardId"] == parent.shard_id for r in batch)]
    split_batches = [
        i for i, batch in enumerate(batches) if any(r["shardId"] in closed - {parent.shard_id} for r in batch)
    ]
    merged = {row["shardId"] for row in rows} - closed
    merged_batches = [i for i, batch in enumerate(batches) if any(r["shardId"] in merged for r in batch)]
    assert len(merged) == 1 and split_batches and merged_batches
    assert max(parent_batches) < min(split_batches) and max(split_batches) < min(merged_batches)
    assert all(parse_offset(start).shards[f"{stream}/{shard_id}"].kind == SHARD_END for shard_id in closed)
    # Where each closed shard's end was learnt. kinesis-mock: always the planner's probe. AWS's end event: the
    # read itself when the event is buffered before the task drains the subscription, else (the broker answered
    # "tip" from the last records event's millisBehindLatest 0) the probe; both ends are exact.
    stops = last_stops(source, offsets, closed)
    assert set(stops) == closed
    if shape == "aws":
        assert set(stops.values()) <= {STOP_SHARD_END, STOP_CAUGHT_UP}
        assert proxy.stats["shard_ends"] >= 1  # the end events met the subscriptions the broker still held
    else:
        assert set(stops.values()) == {STOP_CAUGHT_UP}
