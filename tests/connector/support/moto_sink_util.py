"""Helpers of the sink's unit tests on moto's Kinesis in the test's process (``tests/connector/sink/conftest.py``
starts it): the writers' options, rows, and what a stream stored, unpacked by aws-kinesis-agg (a reader independent
of the connector)."""

from __future__ import annotations

import base64
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from tests.connector.support.agg_util import agg_user_records

REGION = "us-east-1"
SCHEMA = StructType([StructField("data", BinaryType()), StructField("partitionKey", StringType())])
ROUTED = StructType([*SCHEMA.fields, StructField("streamName", StringType())])


def options(stream: str | None = "orders", **extra: str) -> dict[str, str]:
    given = {
        "kinesis.region": REGION,
        "kinesis.awsAccessKeyId": "AKIAIOSFODNN7EXAMPLE",
        "kinesis.awsSecretKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        **extra,
    }
    if stream is not None:
        given["kinesis.streamName"] = stream
    return given


def stored(kinesis: Any, stream: str) -> tuple[Counter[tuple[bytes, str]], int]:
    """The stream's user records (data, partition key), aggregates unpacked by aws-kinesis-agg; and how many Kinesis
    records held them."""
    users: Counter[tuple[bytes, str]] = Counter()
    kinesis_records = 0
    for shard in kinesis.list_shards(StreamName=stream)["Shards"]:
        iterator = kinesis.get_shard_iterator(
            StreamName=stream, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        for record in kinesis.get_records(ShardIterator=iterator, Limit=10_000)["Records"]:
            kinesis_records += 1
            for user in agg_user_records(record):
                users[(base64.b64decode(user["data"]), user["partitionKey"])] += 1
    return users, kinesis_records


def rows(count: int, prefix: str = "row") -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {"data": [f"{prefix}-{i}".encode() for i in range(count)], "partitionKey": [f"key-{i}" for i in range(count)]},
        schema=pa.schema([("data", pa.binary()), ("partitionKey", pa.string())]),
    )


def expected(count: int, prefix: str = "row") -> Counter[tuple[bytes, str]]:
    return Counter((f"{prefix}-{i}".encode(), f"key-{i}") for i in range(count))


@dataclass(frozen=True)
class Streams:
    client: Any
    orders: str  # 2 shards
    returns: str  # 1 shard
