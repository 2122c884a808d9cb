"""Resharding on kinesis-mock (AWS-faithful shard ends and lineage), driven like Spark drives the reader: splits
and merges while records keep arriving, and while the query is stopped. Every record is read exactly once and
each partition key's records come in the order they were written, because a child shard is read only after its
parents are read to their end."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from localaws import LocalServer
from localaws.fault_proxy import FaultProxy
from localaws.streams import put_records
from pyspark_aws_kinesis.clock import now_ms
from pyspark_aws_kinesis.fetch.iterators import Handoff
from pyspark_aws_kinesis.positions import SHARD_END, Position
from pyspark_aws_kinesis.shards import Shard, list_shards, open_shards
from pyspark_aws_kinesis.source.offsets import parse_offset
from pyspark_aws_kinesis.source.planner import BatchPlanner
from pyspark_aws_kinesis.source.settings import SourceSettings
from tests.connector.queries.reshard_util import KEYS, check_once_and_in_key_order, merge, split
from tests.connector.support.source_util import drain, next_batch, reader, roundtrip, source_options, wait_for


class _Endpoint:
    """A proxy where ``source_options`` expects a server (it only needs the endpoint)."""

    def __init__(self, endpoint_url: str):
        self.endpoint_url = endpoint_url


class Producer(threading.Thread):
    """Writes rounds of one record per key (``key:n``) until stopped; each key's records in order."""

    def __init__(self, kinesis: Any, stream: str):
        super().__init__(daemon=True)
        self.kinesis, self.stream = kinesis, stream
        self.produced: list[bytes] = []
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            round_ = 0
            while not self.stopping.is_set():
                batch = [(f"{key}:{round_}".encode(), key) for key in KEYS]
                put_records(self.kinesis, self.stream, batch)
                self.produced += [data for data, _key in batch]
                round_ += 1
                time.sleep(0.05)
        except BaseException as exc:  # surfaced by stop()
            self.error = exc

    def stop(self) -> list[bytes]:
        self.stopping.set()
        self.join(30)
        assert self.error is None, self.error
        return self.produced


def read_for(source, start: dict, seconds: float) -> tuple[dict, list[dict[str, Any]]]:
    """Run micro-batches for about ``seconds``; returns the last offset and the rows in read order."""
    rows: list[dict[str, Any]] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            start, batch = next_batch(source, start, timeout_s=1.0)
        except AssertionError:  # no batch within a second: fine while records are sparse
            continue
        rows += batch
    return start, rows


@pytest.mark.slow
def test_split_and_merge_while_records_arrive(kinesis_mock: LocalServer, mock_stream, tmp_path) -> None:
    stream = mock_stream(shards=2)
    kinesis = kinesis_mock.client("kinesis")
    producer = Producer(kinesis, stream)
    producer.start()
    # A small cap per batch keeps a backlog in the parents when their children start to take records.
    source = reader(source_options(kinesis_mock, stream, tmp_path, **{"kinesis.maxFetchRecordsPerShard": "2"}))
    start = roundtrip(source.initialOffset())
    start, rows = read_for(source, start, 1.0)
    # The query falls behind (a slow batch, say): the parents hold a backlog when their children take records.
    time.sleep(1.0)
    first = open_shards(list_shards(kinesis, stream))[0]
    split(kinesis, stream, first)
    time.sleep(1.0)
    start, more = read_for(source, start, 2.0)
    rows += more
    time.sleep(1.0)
    low, high = open_shards(list_shards(kinesis, stream))[:2]  # the split's two children, adjacent
    merge(kinesis, stream, low, high)
    time.sleep(1.0)
    start, more = read_for(source, start, 2.0)
    rows += more
    produced = producer.stop()
    start, batches = drain(source, start, expect=len(produced) - len(rows))
    rows += [row for batch in batches for row in batch]

    check_once_and_in_key_order(rows, produced)
    shards = parse_offset(start).shards
    for parent in (first.shard_id, low.shard_id, high.shard_id):
        assert shards[f"{stream}/{parent}"].kind == SHARD_END
    read_from = {row["shardId"] for row in rows}
    assert {first.shard_id, low.shard_id, high.shard_id} <= read_from
    assert len(read_from) == 5  # two original shards, two children, one merged child


def test_reshard_while_the_query_is_stopped(kinesis_mock: LocalServer, mock_stream, tmp_path) -> None:
    stream = mock_stream(shards=1)
    kinesis = kinesis_mock.client("kinesis")
    before = [(f"{key}:{n}".encode(), key) for n in range(3) for key in KEYS]
    put_records(kinesis, stream, before)
    options = source_options(kinesis_mock, stream, tmp_path, **{"kinesis.maxFetchRecordsPerShard": "5"})
    source = reader(options)
    start, rows = next_batch(source, roundtrip(source.initialOffset()))
    assert len(rows) == 5  # the query stops with 13 records left in the shard about to be split
    (parent,) = list_shards(kinesis, stream)
    split(kinesis, stream, parent)
    after = [(f"{key}:{n}".encode(), key) for n in range(3, 6) for key in KEYS]
    put_records(kinesis, stream, after)

    restarted = reader(options)  # a new driver resumes from the checkpointed offset
    start, batches = drain(restarted, start, expect=len(before + after) - len(rows))
    rows += [row for batch in batches for row in batch]
    check_once_and_in_key_order(rows, [data for data, _key in before + after])
    parent_batches = [i for i, batch in enumerate(batches) if any(r["shardId"] == parent.shard_id for r in batch)]
    child_batches = [i for i, batch in enumerate(batches) if any(r["shardId"] != parent.shard_id for r in batch)]
    assert max(parent_batches) < min(child_batches), "children are read only after the parent's last batch"


def test_latest_skips_closed_shards_and_trim_horizon_reads_them(kinesis_mock: LocalServer, mock_stream, tmp_path):
    stream = mock_stream(shards=1)
    kinesis = kinesis_mock.client("kinesis")
    put_records(kinesis, stream, [(b"old-parent", "k")])
    (parent,) = list_shards(kinesis, stream)
    split(kinesis, stream, parent)
    put_records(kinesis, stream, [(b"old-child", "k")])

    latest = reader(source_options(kinesis_mock, stream, tmp_path / "latest", **{"kinesis.startingPosition": "LATEST"}))
    initial = parse_offset(roundtrip(latest.initialOffset()))
    assert initial.shards[f"{stream}/{parent.shard_id}"].kind == SHARD_END  # nothing can arrive in a closed shard
    assert len(initial.readable()) == 2

    oldest = reader(source_options(kinesis_mock, stream, tmp_path / "oldest"))
    _end, batches = drain(oldest, roundtrip(oldest.initialOffset()), expect=2)
    assert [[bytes(r["data"]) for r in batch] for batch in batches] == [[b"old-parent"], [b"old-child"]]


@pytest.mark.slow
def test_a_spark_query_keeps_key_order_across_a_split(spark, kinesis_mock: LocalServer, mock_stream, tmp_path):
    """The same in a real query: foreachBatch keeps each batch's rows in order; a split happens mid-stream."""
    stream = mock_stream(shards=1)
    kinesis = kinesis_mock.client("kinesis")
    producer = Producer(kinesis, stream)
    producer.start()
    seen: list[bytes] = []

    def collect(frame, _batch_id: int) -> None:
        seen.extend(bytes(row.data) for row in frame.select("data").collect())

    options = source_options(kinesis_mock, stream, tmp_path / "meta", **{"kinesis.maxFetchRecordsPerShard": "20"})
    query = (
        spark.readStream.format("aws-kinesis")
        .options(**options)
        .load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        time.sleep(2.0)
        (parent,) = list_shards(kinesis, stream)
        split(kinesis, stream, parent)
        time.sleep(2.0)
        produced = producer.stop()
        wait_for(lambda: len(seen) >= len(produced), timeout_s=120, what="every produced record")
    finally:
        producer.stopping.set()
        query.stop()
    check_once_and_in_key_order([{"data": item} for item in seen], produced)


def test_per_shard_state_stays_bounded_over_reshards_and_expiries(
    kinesis_mock: LocalServer, mock_stream, tmp_path
) -> None:
    """Split, merge, the closed shards expire (a proxy leaves them out of ListShards as AWS does after the
    retention): after two cycles (7 shards seen) every per-shard structure of the driver holds the one shard
    listed. The shard cache kept all 7 before."""
    stream = mock_stream(shards=1)
    kinesis = kinesis_mock.client("kinesis")
    produced: list[bytes] = []
    rows: list[dict[str, Any]] = []
    with FaultProxy(kinesis_mock.endpoint_url) as proxy:
        endpoint = _Endpoint(proxy.endpoint_url)
        options = source_options(endpoint, stream, tmp_path, **{"kinesis.describeShardInterval": "0s"})  # type: ignore[arg-type]
        source = reader(options)
        start = roundtrip(source.initialOffset())
        planner = source.offsets.planner
        planner.catalog._full_interval_s = 0.0  # a full listing on every trigger (60 s by default)

        def produce_and_drain(round_number: int) -> dict:
            batch = [(f"{key}:{round_number}".encode(), key) for key in KEYS]
            put_records(kinesis, stream, batch)
            produced.extend(data for data, _key in batch)
            end, batches = drain(source, start, expect=len(batch))
            rows.extend(row for batch in batches for row in batch)
            return end

        for cycle in range(2):
            start = produce_and_drain(4 * cycle)
            (parent,) = open_shards(list_shards(kinesis, stream))
            split(kinesis, stream, parent)
            start = produce_and_drain(4 * cycle + 1)
            low, high = sorted(open_shards(list_shards(kinesis, stream)), key=lambda shard: shard.starting_hash_key)
            merge(kinesis, stream, low, high)
            start = produce_and_drain(4 * cycle + 2)
            for shard in (parent, low, high):  # read to their ends, and now past the retention
                proxy.expire_shard(stream, shard.shard_id)
            start = produce_and_drain(4 * cycle + 3)
        check_once_and_in_key_order(rows, produced)
        (open_shard,) = open_shards(list_shards(kinesis, stream))
        tracked = {f"{stream}/{open_shard.shard_id}"}
        assert set(parse_offset(start).shards) == tracked
        assert list(planner.catalog._by_key) == [(stream, open_shard.shard_id)]
        assert set(planner.prober._states) <= tracked and set(planner.handoffs) <= tracked
        assert set(planner.health._lag) <= tracked


class _Listing:
    """The planner's shard catalog, as ListShards answers now (set by the test)."""

    def __init__(self) -> None:
        self.now: list[Shard] = []

    def shards(self, stream: str, fresh: bool = False) -> list[Shard]:
        return self.now


def test_shards_read_to_their_end_leave_the_probers_state_handoffs_and_lag_at_once(tmp_path) -> None:
    """1,000 shards, 10 a generation: each reshard closes the last generation, which the query reads to its end,
    and opens 10 children; closed shards stay listed for 5 generations (the retention). The prober's states (a
    probe's held answer: up to 64 KiB each), the handed-on iterators and the lag in the progress report keep only
    the shards still read, not the finished ones ListShards still shows (whose last lag is no longer true)."""
    settings = SourceSettings.from_options(
        {"kinesis.streamName": "s", "kinesis.region": "us-east-1", "kinesis.metadataPath": str(tmp_path)}
    )
    planner = BatchPlanner(settings)
    listing = _Listing()
    planner.catalog = listing  # type: ignore[assignment]
    positions: dict[str, Position] = {}
    parents: dict[str, tuple[str, ...]] = {}

    def listed(current: int) -> list[Shard]:
        """Generation ``current`` open, the 5 before it closed (still within the retention)."""
        return [
            Shard(
                f"shardId-{generation * 10 + index:012d}", None, None, 0, 0, "1", None if generation == current else "9"
            )
            for generation in range(max(0, current - 5), current + 1)
            for index in range(10)
        ]

    for current in range(100):
        for key in positions:  # the last generation was read to its end
            positions[key] = Position(SHARD_END)
        listing.now = listed(current)
        planner._track(positions, parents, current)
        reading = {key for key, position in positions.items() if not position.is_shard_end}
        for key in reading:  # probed and read: a state and a handed-on iterator each
            handoff = Handoff(positions[key], f"iterator of {key}", now_ms())
            planner.prober.observed(key, positions[key], handoff)
            planner.handoffs[key] = handoff
            planner.health.probed(key, 5_000 + current)
    assert len(positions) == 60 and len(reading) == 10  # the offsets track what ListShards shows (the retention)
    assert set(planner.prober._states) == reading and set(planner.handoffs) == reading
    report = planner.health.lag_report()  # every generation's lag was heard of; the closed ones' is gone
    assert report is not None and set(report["millisBehindLatest"]) == reading


def test_a_vanished_shard_is_said_and_counted_once_while_the_batches_plan_from_the_offset_that_holds_it(
    tmp_path, caplog: pytest.LogCaptureFixture
) -> None:
    """``kinesis.failOnDataLoss=false``: a shard not read to its end that ListShards no longer shows (the stream
    re-created, the query stopped past the retention) is lost data, said and counted once. Every idle trigger plans
    from the committed offset, which still holds the shard: it was said and counted again at each (every 10 ms on an
    idle stream)."""
    settings = SourceSettings.from_options(
        {
            "kinesis.streamName": "s",
            "kinesis.region": "us-east-1",
            "kinesis.metadataPath": str(tmp_path),
            "kinesis.failOnDataLoss": "false",
        }
    )
    planner = BatchPlanner(settings)
    listing = _Listing()
    planner.catalog = listing  # type: ignore[assignment]
    committed: dict[str, Position] = {}
    listing.now = [Shard("shardId-000000000000", None, None, 0, 0, "1", None)]
    planner._track(committed, {}, 0)
    listing.now = [Shard("shardId-000000000001", None, None, 0, 0, "1", None)]  # the stream re-created
    with caplog.at_level(logging.WARNING, logger="pyspark_aws_kinesis"):
        for _trigger in range(5):
            positions = dict(committed)
            planner._track(positions, {}, 1)
            assert set(positions) == {"s/shardId-000000000001"}
    assert planner.health.loss_count == 1
    assert caplog.text.count("ListShards no longer shows it") == 1
    planner._track(dict(positions), {}, 2)  # a batch planned past it: the shard is no longer the query's
    assert planner.health._reported_vanished == set()
