"""Admission control, AvailableNow, idle streams and lag: ``kinesis.maxRecordsPerTrigger`` (and Spark's
ReadMaxRows) spread over shards, ``Trigger.AvailableNow`` reading what had arrived and stopping (several batches
on pyspark 4.2+, one on 4.0.2), no empty micro-batches and bounded probing while idle, millisBehindLatest in
the query progress."""

from __future__ import annotations

import json
import time
from collections import Counter

import pyarrow.parquet as pq
import pytest
from source_util import FORMAT, drain, memory_query, payloads, reader, roundtrip, source_options, wait_for

from localaws import LocalServer
from localaws.streams import put_records
from pyspark_aws_kinesis.compat import HAS_READ_LIMITS, ReadMaxRows
from pyspark_aws_kinesis.source.offsets import parse_offset


def _produce(server: LocalServer, stream: str, count: int, prefix: str = "r") -> list[bytes]:
    data = [f"{prefix}-{i:04d}".encode() for i in range(count)]
    put_records(server.client("kinesis"), stream, [(item, f"key-{i}") for i, item in enumerate(data)])
    return data


def test_max_records_per_trigger_is_spread_over_the_shards(kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    stream = lite_stream(shards=4)
    produced = _produce(kinesalite, stream, 120)
    source = reader(source_options(kinesalite, stream, tmp_path, **{"kinesis.maxRecordsPerTrigger": "20"}))
    start = roundtrip(source.initialOffset())
    first = parse_offset(roundtrip(source.latestOffset(start, None)))
    assert sorted(first.max_records.values()) == [5, 5, 5, 5]
    _end, batches = drain(source, start)
    assert all(len(batch) <= 20 for batch in batches)
    assert len(batches) >= 6
    per_shard = Counter(row["shardId"] for row in batches[0])
    assert len(per_shard) == 4 and max(per_shard.values()) <= 5  # every shard gets its share
    assert sorted(payloads([row for batch in batches for row in batch])) == sorted(produced)


def test_sparks_read_limit_overrides_the_option(kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    stream = lite_stream(shards=2)
    _produce(kinesalite, stream, 30)
    source = reader(source_options(kinesalite, stream, tmp_path, **{"kinesis.maxRecordsPerTrigger": "20"}))
    start = roundtrip(source.initialOffset())
    planned = parse_offset(roundtrip(source.latestOffset(start, ReadMaxRows(7))))
    assert sum(planned.max_records.values()) == 7
    assert source.getDefaultReadLimit() == ReadMaxRows(20)


def test_an_idle_stream_is_probed_at_most_once_per_interval_per_shard(
    kinesalite: LocalServer, lite_stream, tmp_path
) -> None:
    stream = lite_stream(shards=3)
    _produce(kinesalite, stream, 9)
    interval_s = 1.0  # kinesis.probeIntervalMs's default
    options = source_options(kinesalite, stream, tmp_path, **{"kinesis.probeIntervalMs": str(int(interval_s * 1000))})
    source = reader(options)
    start, _batches = drain(source, roundtrip(source.initialOffset()), idle_s=2 * interval_s)
    calls_before = source.offsets.planner.prober.calls
    began = time.monotonic()
    for _trigger in range(200):  # Spark's idle loop asks every 10 ms: 2 s or more, however loaded the machine
        assert roundtrip(source.latestOffset(start, None)) == start
        time.sleep(0.01)
    elapsed_s = time.monotonic() - began
    probes = source.offsets.planner.prober.calls - calls_before
    # Each idle shard is asked once an interval on average, two asks at least half an interval apart.
    assert probes <= 3 * (elapsed_s / interval_s + 1.5), f"{probes} probes in {elapsed_s:.1f} s for 3 shards"
    assert probes >= 3  # it did look


def _run_available_now(spark, options: dict[str, str], tmp_path) -> tuple[list[int], list[bytes]]:
    """One AvailableNow run into a parquet sink (restartable); its batches' sizes and the sink's records so far."""
    frame = spark.readStream.format(FORMAT).options(**options).load()
    query = (
        frame.select("data")
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120), "AvailableNow did not stop by itself"
    assert query.exception() is None
    sizes = [progress["numInputRows"] for progress in query.recentProgress]
    return sizes, pq.read_table(str(tmp_path / "out"))["data"].to_pylist()


@pytest.mark.slow
def test_available_now_reads_what_arrived_and_stops(spark, kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    stream = lite_stream(shards=3)
    produced = _produce(kinesalite, stream, 60)
    options = source_options(kinesalite, stream, tmp_path / "meta")
    batches, rows = _run_available_now(spark, options, tmp_path)
    assert sum(batches) == 60 and 0 not in batches
    assert sorted(rows) == sorted(produced)
    later = _produce(kinesalite, stream, 5, "later")
    again, rows = _run_available_now(spark, options, tmp_path)  # a restart from the checkpoint
    assert sum(again) == 5
    assert sorted(rows) == sorted(produced + later)


def test_available_now_with_a_limit_runs_several_batches(spark, kinesalite: LocalServer, lite_stream, tmp_path):
    stream = lite_stream(shards=2)
    produced = _produce(kinesalite, stream, 60)
    options = source_options(kinesalite, stream, tmp_path / "meta", **{"kinesis.maxRecordsPerTrigger": "25"})
    batches, rows = _run_available_now(spark, options, tmp_path)
    assert all(0 < size <= 25 for size in batches)
    if HAS_READ_LIMITS:  # SupportsTriggerAvailableNow: batches until everything that had arrived is read
        assert len(batches) >= 3
        assert sorted(rows) == sorted(produced)
    else:  # pyspark 4.0.2 runs one batch for AvailableNow; the next run goes on from there
        assert len(batches) == 1 and len(set(rows)) == batches[0]


@pytest.mark.slow
def test_an_idle_query_runs_no_empty_batches_and_reports_lag(
    spark, kinesalite: LocalServer, lite_stream, tmp_path
) -> None:
    stream = lite_stream(shards=2)
    produced = _produce(kinesalite, stream, 20)
    frame = spark.readStream.format(FORMAT).options(**source_options(kinesalite, stream, tmp_path / "meta")).load()
    query = memory_query(frame, "idle_rows", tmp_path / "cp", trigger_ms=100)
    try:
        wait_for(lambda: spark.table("idle_rows").count() >= 20, what="the 20 records")
        time.sleep(3.0)  # idle: 30 triggers
        progress = list(query.recentProgress)
    finally:
        query.stop()
    assert sorted(bytes(row.data) for row in spark.table("idle_rows").collect()) == sorted(produced)
    ran = {p["batchId"]: p["numInputRows"] for p in progress}
    assert all(rows > 0 for rows in ran.values()), f"empty micro-batches ran: {ran}"
    if HAS_READ_LIMITS:  # reportLatestOffset exists from pyspark 4.2
        latest = progress[-1]["sources"][0]["latestOffset"]
        report = json.loads(latest) if isinstance(latest, str) else latest
        assert report["maxMillisBehindLatest"] >= 0
        assert set(report["millisBehindLatest"]) == {f"{stream}/shardId-00000000000{i}" for i in range(2)}


@pytest.mark.slow
def test_a_steady_stream_that_stops_costs_at_most_one_empty_batch_a_shard(
    spark, kinesalite: LocalServer, lite_stream, tmp_path
) -> None:
    """Records every 50 ms for 3 s make both shards steady: batches read them without probes (their offsets have
    no arrival bound). When the producer stops, a steady shard's next read finds nothing: an empty micro-batch, at
    most one a shard, and none once the shards are probed again. Every record arrives once. (A pause of a trigger
    or more while records flow costs one too: the producer here never pauses that long.) The first records are put
    before the query starts: Spark runs a new query's batch 0 even when its source has nothing, and a first trigger
    that beats the put would be that empty batch."""
    stream = lite_stream(shards=2)
    kinesis, produced = kinesalite.client("kinesis"), _produce(kinesalite, stream, 4, "warm")
    frame = spark.readStream.format(FORMAT).options(**source_options(kinesalite, stream, tmp_path / "meta")).load()
    query = memory_query(frame, "steady_rows", tmp_path / "cp")
    try:
        wait_for(lambda: spark.table("steady_rows").count() >= 4, what="the first batch")  # workers started
        for tick in range(60):
            records = [(f"t{tick:02d}-{i}".encode(), f"key-{i}") for i in range(4)]
            put_records(kinesis, stream, records)
            produced += [data for data, _key in records]
            time.sleep(0.05)
        wait_for(lambda: spark.table("steady_rows").count() >= len(produced), what="every record")
        time.sleep(3.0)  # idle: 15 triggers
        progress = list(query.recentProgress)
    finally:
        query.stop()
    assert sorted(bytes(row.data) for row in spark.table("steady_rows").collect()) == sorted(produced)
    ends = [p["sources"][0]["endOffset"] for p in progress]
    unbounded = [end for end in ends if "untilMs" not in str(end)]  # JSON, or a dict's repr (pyspark 4.0.2)
    assert unbounded, f"no batch read a steady shard without a probe: {ends[-3:]}"
    empty = [p["batchId"] for p in progress if p["numInputRows"] == 0]
    last_rows = max(p["batchId"] for p in progress if p["numInputRows"] > 0)
    assert len(empty) <= 2 and all(last_rows < batch <= last_rows + 2 for batch in empty), (empty, last_rows)
