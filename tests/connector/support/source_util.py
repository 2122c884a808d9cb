"""Helpers for the source tests: options for a local server, driving a reader like Spark does, waiting."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from localaws import LocalServer
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY
from pyspark_aws_kinesis.aws.clients import kinesis_client
from pyspark_aws_kinesis.aws.settings import ClientSettings
from pyspark_aws_kinesis.source.offsets import KinesisOffset
from pyspark_aws_kinesis.source.stream_reader import KinesisStreamReader

FORMAT = "aws-kinesis"


def source_options(server: LocalServer, streams: str, metadata_path: Any, **extra: str) -> dict[str, str]:
    """Options for reading ``streams`` on a local server, fast retries, no pause between GetRecords calls, a probe
    at every plan (the tests decide when records arrive; the probe interval's own tests set it)."""
    return {
        "kinesis.streamName": streams,
        "kinesis.endpointUrl": server.endpoint_url,
        "kinesis.awsAccessKeyId": DUMMY_ACCESS_KEY,
        "kinesis.awsSecretKey": DUMMY_SECRET_KEY,
        "kinesis.metadataPath": str(metadata_path),
        "kinesis.startingPosition": "TRIM_HORIZON",
        "kinesis.getRecords.fetchIntervalMs": "0",
        "kinesis.probeIntervalMs": "0",
        "kinesis.clientRetryIntervalsMs": "1",
        "kinesis.clientMaxRetryIntervalMs": "20",
        **extra,
    }


def client_settings(server: LocalServer) -> ClientSettings:
    """Client settings for a local server (its endpoint, the dummy keys), as the connector builds clients from."""
    return ClientSettings("us-east-1", server.endpoint_url, DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY)


def first_shard_iterator(server: LocalServer, stream: str, iterator_type: str = "TRIM_HORIZON") -> str:
    """A shard iterator of the stream's first shard (``shardId-000000000000``)."""
    answer = kinesis_client(client_settings(server)).get_shard_iterator(
        StreamName=stream, ShardId="shardId-000000000000", ShardIteratorType=iterator_type
    )
    return answer["ShardIterator"]


def reader(options: dict[str, str]) -> KinesisStreamReader:
    """A stream reader as Spark builds it (Spark lower-cases option names)."""
    return KinesisStreamReader(None, {key.lower(): value for key, value in options.items()})  # type: ignore[arg-type]


def roundtrip(offset: dict) -> dict:
    """What Spark does to an offset: JSON out, JSON back."""
    return json.loads(json.dumps(offset))


def read_all(source: KinesisStreamReader, partitions: list) -> list[dict[str, Any]]:
    """Every row the partitions yield, as dicts, read on a fresh copy of the reader (as an executor does), grouped by
    shard in the partitions' shard order, each shard's rows in the order read. A task reads its shards side by side,
    so how rows of different shards interleave is timing, not something a test can compare."""
    import pickle

    executor_copy = pickle.loads(pickle.dumps(source))
    rows: list[dict[str, Any]] = []
    for partition in partitions:
        executor_partition = pickle.loads(pickle.dumps(partition))
        tasks = getattr(executor_partition, "tasks", ())
        by_shard: dict[str, list[dict[str, Any]]] = {task.shard_id: [] for task in tasks}
        for batch in executor_copy.read(executor_partition):
            assert isinstance(batch, pa.RecordBatch)
            for row in batch.to_pylist():
                by_shard.setdefault(row["shardId"], []).append(row)
        rows.extend(row for shard_rows in by_shard.values() for row in shard_rows)
    return rows


def run_batch(source: KinesisStreamReader, start: dict) -> tuple[dict, list[dict[str, Any]]]:
    """One micro-batch as pyspark 4.2+ runs it: latestOffset(start) -> partitions -> read -> commit."""
    end = roundtrip(source.latestOffset(start, None))
    rows = read_all(source, list(source.partitions(start, end)))
    source.commit(end)
    return end, rows


def wait_for(condition: Callable[[], Any], timeout_s: float = 90.0, interval_s: float = 0.25, what: str = "") -> Any:
    """Poll ``condition`` until it returns a truthy value; fail with ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what or condition}")
        time.sleep(interval_s)


def payloads(rows: list[dict[str, Any]]) -> list[bytes]:
    return [bytes(row["data"]) for row in rows]


def memory_query(frame: Any, name: str, checkpoint: Any, trigger_ms: int = 200) -> Any:
    """``frame`` streamed into the memory sink table ``name`` (checkpoint at ``checkpoint``), a processing-time
    trigger of ``trigger_ms``; the started query."""
    return (
        frame.writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime=f"{trigger_ms} milliseconds")
        .start()
    )


def next_planned(source: KinesisStreamReader, start: dict, timeout_s: float = 30.0) -> dict:
    """Trigger until ``latestOffset`` plans a micro-batch after ``start`` (idle triggers plan none); its end offset.
    Fails after ``timeout_s`` without a batch."""
    return wait_for(
        lambda: (lambda e: e if e != start else None)(roundtrip(source.latestOffset(start, None))),
        timeout_s,
        interval_s=0.05,
        what="a micro-batch to be planned",
    )


def next_batch(source: KinesisStreamReader, start: dict, timeout_s: float = 30.0) -> tuple[dict, list[dict[str, Any]]]:
    """The next micro-batch that Spark would run: ``next_planned``, then read and commit it."""
    end = next_planned(source, start, timeout_s)
    rows = read_all(source, list(source.partitions(start, end)))
    source.commit(end)
    return end, rows


def drain(
    source: KinesisStreamReader, start: dict, idle_s: float = 1.0, expect: int = 0
) -> tuple[dict, list[list[dict[str, Any]]]]:
    """Run micro-batches until ``expect`` rows are read, then until none is planned for ``idle_s`` (longer than the
    probe interval); returns the last offset and each batch's rows. Throttled probes back off for longer than
    ``idle_s``, so a test that knows its count passes it instead of trusting a quiet second."""
    batches: list[list[dict[str, Any]]] = []
    while True:
        read = sum(map(len, batches))
        try:
            start, rows = next_batch(source, start, timeout_s=idle_s if read >= expect else 60.0)
        except AssertionError:
            if read < expect:
                raise AssertionError(f"drained {read} of {expect} rows") from None
            return start, batches
        batches.append(rows)


def put_numbered(server: LocalServer, stream: str, prefix: str, count: int, keys: int | None = None) -> list[bytes]:
    """Put ``count`` records ``<prefix>-0000``… (partition keys ``key-<i>``, or ``key-<i % keys>`` to reuse ``keys``
    keys); returns their data in order."""
    from localaws.streams import put_records

    data = [f"{prefix}-{i:04d}".encode() for i in range(count)]
    key_of = (lambda i: f"key-{i}") if keys is None else (lambda i: f"key-{i % keys}")
    put_records(server.client("kinesis"), stream, [(item, key_of(i)) for i, item in enumerate(data)])
    return data


def records_and_a_cut(server: LocalServer, stream: str) -> tuple[list[dict[str, Any]], Any]:
    """Six records put one at a time (each gets its own arrival time), as GetRecords returns them, and the arrival
    time of the middle one: an AT_TIMESTAMP that splits them."""
    from localaws.streams import put_records, read_stream

    kinesis = server.client("kinesis")
    for i in range(6):
        put_records(kinesis, stream, [(f"r{i}".encode(), "k")])
    records = read_stream(kinesis, stream)
    arrivals = sorted({record["ApproximateArrivalTimestamp"] for record in records})
    assert len(arrivals) >= 3, "records need distinct arrival times"
    return records, arrivals[len(arrivals) // 2]


def plan_first_batch(source: KinesisStreamReader) -> tuple[dict, dict]:
    """A new query's initial offset and its first batch's end offset, as Spark asks for them."""
    start = roundtrip(source.initialOffset())
    return start, roundtrip(source.latestOffset(start, None))


def format_1_json(offset: KinesisOffset) -> str:
    """``offset`` in format 1, as pyspark wrote it to ``offsets/<batch>`` before format 2: what checkpoints made
    by the connector at 3fb384a hold (source/test_offsets.py checks it byte for byte against a stored fixture)."""
    body: dict[str, Any] = {
        "v": 1,
        "sourceId": offset.source_id,
        "metadataPath": offset.metadata_path,
        "batchId": offset.batch_id,
        "shards": {key: offset.shards[key].to_json() for key in sorted(offset.shards)},
    }
    if offset.parents:
        body["parents"] = {key: list(parents) for key, parents in offset.parents.items()}
    if offset.reads is not None:
        body["reads"] = sorted(offset.reads)
    if offset.max_records:
        body["maxRecords"] = dict(offset.max_records)
    if offset.until_ms is not None:
        body["untilMs"] = offset.until_ms
    if offset.source_document:
        body["sourceDocument"] = True
    if offset.pinned is not None:
        body["pinned"] = dict(offset.pinned)
    return json.dumps(body, sort_keys=True)


def start_parquet_query(
    spark: Any, options: dict[str, str], output: Any, checkpoint: Any, trigger: str = "100 milliseconds"
) -> Any:
    """Start a streaming query reading ``options`` into Parquet files at ``output``, checkpointed at
    ``checkpoint``, on a processing-time ``trigger``."""
    return (
        spark.readStream.format(FORMAT)
        .options(**options)
        .load()
        .writeStream.format("parquet")
        .option("path", str(output))
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime=trigger)
        .start()
    )
