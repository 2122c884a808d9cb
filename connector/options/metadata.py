"""The metadata store's options: where it is (a path, S3 or a DynamoDB table), how its calls are retried, how
many batches it keeps. ``source.settings`` reads them; ``sink.settings`` reads where the store is and its retries
when ``kinesis.sink.skipReplayedPartitions`` keeps notes there."""

from __future__ import annotations

import re

from .kinds import ENDPOINT, STRING, URL, Kind, choice, integer
from .registry import Option, Side, add

METADATA_PATH = add(
    Option(
        "kinesis.metadataPath",
        URL,
        None,
        "Where executors record, per batch and shard, where they stopped (exact replay): a local path, "
        "`file://`, `hdfs://` or `s3://` URI. Must be shared by driver and executors and be one per query; it is "
        "written into the offsets, so a restart finds it. Spark does not tell a Python source its checkpoint "
        "location: set this beside the checkpoint (`<checkpoint>/kinesis-metadata`). The sink keeps its notes of "
        "partitions written whole here with `kinesis.sink.skipReplayedPartitions` (then required, no default).",
        Side.BOTH,
        default_doc="`<temp dir>/aws-kinesis-metadata-<uid>` (single machine only; private to the user)",
    )
)
METADATA_S3_ENDPOINT_URL = add(
    Option(
        "kinesis.metadata.s3EndpointUrl",
        ENDPOINT,
        None,
        "S3 endpoint for an `s3://` `kinesis.metadataPath` (a VPC endpoint or a local S3); same credentials and "
        "region as Kinesis.",
        Side.BOTH,
        default_doc="the region's AWS endpoint",
    )
)
_TABLE_NAME = re.compile(r"^[A-Za-z0-9_.\-]{3,255}$")


def _check_table_name(value: str) -> None:
    if not _TABLE_NAME.match(value):
        raise ValueError("a DynamoDB table name is 3-255 characters of A-Z, a-z, 0-9, _ . -")


METADATA_COMMITTER_TYPE = add(
    Option(
        "kinesis.metadataCommitterType",
        choice("HDFS", "PATH", "DYNAMODB"),
        "HDFS",
        "Where the per-batch shard metadata lives: `HDFS` (or `PATH`) = the files under `kinesis.metadataPath` "
        "(local, HDFS or S3); `DYNAMODB` = items in the table `kinesis.dynamodb.tableName` (see docs/source.md).",
        Side.BOTH,
    )
)
DYNAMODB_TABLE_NAME = add(
    Option(
        "kinesis.dynamodb.tableName",
        Kind("string", "a DynamoDB table name (3-255 characters of A-Z, a-z, 0-9, _ . -)", STRING.parse),
        None,
        "The metadata table of `kinesis.metadataCommitterType=DYNAMODB` (partition key `sourceId`, sort key "
        "`batchShard`, both strings); created (on demand, TTL on `expiresAt`) when missing and allowed. Several "
        "queries may share one table: each query's items carry its own source id.",
        Side.BOTH,
        default_doc="required for `DYNAMODB`",
        check=_check_table_name,
    )
)
DYNAMODB_ENDPOINT_URL = add(
    Option(
        "kinesis.dynamodb.endpointUrl",
        ENDPOINT,
        None,
        "DynamoDB endpoint of the metadata table (a VPC endpoint or a local server). Not written into the offsets: "
        "a restart uses the value given then.",
        Side.BOTH,
        default_doc="the region's AWS endpoint",
    )
)
DYNAMODB_REGION = add(
    Option(
        "kinesis.dynamodb.region",
        STRING,
        None,
        "Region of the metadata table. Written into the offsets with the table name, so a restart finds the same "
        "items.",
        Side.BOTH,
        default_doc="the Kinesis region",
    )
)
METADATA_NUM_RETRIES = add(
    Option(
        "kinesis.metadataNumRetries",
        integer(0, 100),
        5,
        "Retries of a throttled, failed (5xx), timed-out or conflicting (S3 409) metadata store call (DynamoDB, "
        "S3), including DynamoDB's unprocessed batch items.",
        Side.BOTH,
    )
)
METADATA_RETRY_INTERVALS_MS = add(
    Option(
        "kinesis.metadataRetryIntervalsMs",
        integer(0),
        1000,
        "First metadata retry's backoff; each further retry doubles it (with jitter), up to "
        "`kinesis.metadataMaxRetryIntervalMs`.",
        Side.BOTH,
        unit="ms",
    )
)
METADATA_MAX_RETRY_INTERVAL_MS = add(
    Option(
        "kinesis.metadataMaxRetryIntervalMs",
        integer(0),
        10000,
        "Longest backoff between two metadata retries.",
        Side.BOTH,
        unit="ms",
    )
)
MIN_BATCHES_TO_RETAIN = add(
    Option(
        "kinesis.minBatchesToRetain",
        integer(2),
        100,
        "Batches whose shard metadata is kept; older ones are purged.",
        Side.SOURCE,
        unit="batches",
    )
)
