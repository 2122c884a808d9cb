"""Admission control, AvailableNow, idle streams and lag: ``kinesis.maxRecordsPerTrigger`` (and Spark's
ReadMaxRows) spread over shards, ``Trigger.AvailableNow`` reading what had arrived and stopping (several batches
on pyspark 4.2+, one on 4.0.2), no empty micro-batches and bounded probing while idle, millisBehindLatest in
the query progress."""

from __future__ import annotations

import json
import time
from collections import Counter
from itertools import pairwise

import pyarrow.parquet as pq
import pytest

from localaws import LocalServer
from localaws.streams import put_records
from pyspark_aws_kinesis.compat import HAS_READ_LIMITS, ReadMaxRows
from pyspark_aws_kinesis.source.offsets import parse_offset
from tests.connector.support.source_util import (
    FORMAT,
    drain,
    memory_query,
    payloads,
    reader,
    roundtrip,
    source_options,
    wait_for,
)


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
    _end, batches = drain(source, start, expect=len(produced))
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
    """Records every 50 ms make both shards steady: batches read them without probes (their offsets have no
    arrival bound). When the producer stops, a steady shard's next read finds nothing: an empty micro-batch, at
    most one a shard, and none once the shards are probed again. Every record arrives once. A pause of a trigger
    or more while records flow costs one a shard too: the producer here pauses that long only when the machine
    stalls it, and each such pause is counted. The first records are put before the query starts: Spark runs a
    new query's batch 0 even when its source has nothing, and a first trigger that beats the put would be that
    empty batch."""
    stream = lite_stream(shards=2)
    kinesis, produced = kinesalite.client("kinesis"), _produce(kinesalite, stream, 4, "warm")
    frame = spark.readStream.format(FORMAT).options(**source_options(kinesalite, stream, tmp_path / "meta")).load()
    trigger_s = 0.2
    query = memory_query(frame, "steady_rows", tmp_path / "cp", trigger_ms=int(trigger_s * 1000))
    puts: list[tuple[float, float]] = []  # each put's start and end
    try:
        wait_for(lambda: spark.table("steady_rows").count() >= 4, what="the first batch")  # workers started
        # 3 s of records at least, and on until a batch read the shards without a probe (a loaded machine's
        # batches may take longer than 3 s to get there); at most 60 s.
        while len(puts) < 60 or (not _read_without_a_probe(query.recentProgress) and len(puts) < 1200):
            records = [(f"t{len(puts):04d}-{i}".encode(), f"key-{i}") for i in range(4)]
            began = time.monotonic()
            put_records(kinesis, stream, records)
            puts.append((began, time.monotonic()))
            produced += [data for data, _key in records]
            time.sleep(0.05)
        wait_for(lambda: spark.table("steady_rows").count() >= len(produced), what="every record")
        time.sleep(3.0)  # idle: 15 triggers
        progress = list(query.recentProgress)
    finally:
        query.stop()
    assert sorted(bytes(row.data) for row in spark.table("steady_rows").collect()) == sorted(produced)
    assert _read_without_a_probe(progress), f"no batch read a steady shard without a probe: {progress[-3:]}"
    pauses = sum(1 for (before, _), (_, after) in pairwise(puts) if after - before >= trigger_s)
    empty = [p["batchId"] for p in progress if p["numInputRows"] == 0]
    last_rows = max(p["batchId"] for p in progress if p["numInputRows"] > 0)
    after_the_stop = [batch for batch in empty if last_rows < batch <= last_rows + 2]
    assert len(after_the_stop) <= 2 and len(empty) - len(after_the_stop) <= 2 * pauses, (empty, last_rows, pauses)


def _read_without_a_probe(progress: list) -> bool:
    """Whether a batch's end offset has no arrival bound: it read a steady shard without probing it first."""
    ends = [p["sources"][0]["endOffset"] for p in progress]
    return any("untilMs" not in str(end) for end in ends)  # JSON, or a dict's repr (pyspark 4.0.2)
