"""Helpers for the sink's tests that write into a local stream: options, rows, what the stream stored, and a task's
write in this process with a split between its listing and its PutRecords."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pyarrow as pa
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

import pyspark_aws_kinesis.sink.task as task
from localaws import LocalServer
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY
from localaws.streams import read_stream, wait_for_stream_active
from pyspark_aws_kinesis.kpl import deaggregate, is_aggregated
from pyspark_aws_kinesis.shards import list_shards, open_shards
from pyspark_aws_kinesis.sink import KinesisBatchWriter
from pyspark_aws_kinesis.sink.commit import SinkCommitMessage
from pyspark_aws_kinesis.sink.routing import ShardRouter

ROW_BYTES = 1000


def _rows(count: int) -> list[tuple[bytes, str]]:
    return [(f"{i:08d}".encode().ljust(ROW_BYTES, b"x"), f"key-{i % 50}") for i in range(count)]


def _stored_rows(server: LocalServer, stream: str) -> Counter[tuple[bytes, str]]:
    stored: Counter[tuple[bytes, str]] = Counter()
    for record in read_stream(server.client("kinesis"), stream):
        if is_aggregated(record["Data"]):
            stored.update((user.data, user.partition_key) for user in deaggregate(record["Data"]))
        else:
            stored[(record["Data"], record["PartitionKey"])] += 1
    return stored


MIDDLE = 2**127
SCHEMA = StructType([StructField("data", BinaryType()), StructField("partitionKey", StringType())])


def rows(count: int) -> list[tuple[bytes, str]]:
    return [(f"row-{i}".encode(), f"key-{i}") for i in range(count)]


def split_after_listing(monkeypatch, kinesis: Any, stream: str, stale_forever: bool = False) -> list[ShardRouter]:
    """Make the task's first ListShards be followed by a split of the stream's one shard at MIDDLE.

    Returns the routers handed to the task. ``stale_forever``: every later listing is the pre-split one too.
    """
    listed = task.open_shard_router
    handed: list[ShardRouter] = []

    def listing_then_split(client, stream_name: str, settings) -> ShardRouter:
        if handed and not stale_forever:
            router = listed(client, stream_name, settings)
        elif handed:
            router = handed[0]
        else:
            router = listed(client, stream_name, settings)
            (parent,) = open_shards(list_shards(kinesis, stream))
            kinesis.split_shard(StreamName=stream, ShardToSplit=parent.shard_id, NewStartingHashKey=str(MIDDLE))
            time.sleep(0.2)  # kinesis-mock takes 100 ms and reports ACTIVE before it starts
            wait_for_stream_active(kinesis, stream)
        handed.append(router)
        return router

    monkeypatch.setattr(task, "open_shard_router", listing_then_split)
    return handed


def write(options: dict[str, str], records: list[tuple[bytes, str]]) -> tuple[Any, SinkCommitMessage]:
    """The task side of a batch write, in this process: the writer Spark would pickle, and its write()."""
    writer = KinesisBatchWriter(SCHEMA, {key.lower(): value for key, value in options.items()})
    batch = pa.RecordBatch.from_pylist([{"data": d, "partitionKey": k} for d, k in records])
    return writer, writer.write(iter([batch]))


def sink_options(endpoint_url: str, stream: str | None, **extra: str) -> dict[str, str]:
    options = {
        "kinesis.endpointUrl": endpoint_url,
        "kinesis.awsAccessKeyId": DUMMY_ACCESS_KEY,
        "kinesis.awsSecretKey": DUMMY_SECRET_KEY,
        "kinesis.clientRetryIntervalsMs": "1",
        "kinesis.clientMaxRetryIntervalMs": "20",
        **extra,
    }
    if stream:
        options["kinesis.streamName"] = stream
    return options
