"""The sink's options: KPL aggregation, concurrent PutRecords calls and skipping replayed partitions (two more are
accepted for compatibility and have no effect). ``sink.settings`` reads them."""

from __future__ import annotations

from .kinds import BOOL, integer
from .registry import Option, Side, add

AGGREGATION_ENABLED = add(
    Option(
        "kinesis.sink.aggregationEnabled",
        BOOL,
        True,
        "Pack rows into KPL aggregated records of up to 256 KiB, one aggregate per target shard (readers de-aggregate "
        "them: this source, the KCL, aws-kinesis-agg). Many more rows per second for small rows.",
        Side.SINK,
    )
)
MAX_CONNECTIONS = add(
    Option(
        "kinesis.sink.maxConnections",
        integer(1, 64),
        1,
        "Concurrent PutRecords calls per task (and per target stream). Rows of one partition key, or of one shard "
        "when aggregating, always go through the same call sequence, so their order holds.",
        Side.SINK,
        unit="calls",
    )
)
SKIP_REPLAYED_PARTITIONS = add(
    Option(
        "kinesis.sink.skipReplayedPartitions",
        BOOL,
        False,
        "`writeStream` only: each task keeps a small note in the metadata store (`kinesis.metadataPath` or "
        "`kinesis.metadataCommitterType=DYNAMODB`, shared by driver and executors) when it has written its "
        "partition whole; when Spark runs the same micro-batch again (after a driver restart), a partition with a "
        "note and the same rows is not written again. Notes of older batches are deleted as batches commit. Rows "
        'in calls that were in flight at a crash can still be written twice (docs/sink.md, "Skipping replayed '
        'partitions").',
        Side.SINK,
    )
)
FLUSH_WAIT_TIME_MS = add(
    Option(
        "kinesis.sink.flushWaitTimeMs",
        integer(0),
        100,
        "Accepted for compatibility with the awslabs connector; no effect: this sink sends a task's rows before "
        "the task ends and has nothing left to flush.",
        Side.SINK,
        unit="ms",
    )
)
RECORD_MAX_BUFFERED_TIME_MS = add(
    Option(
        "kinesis.sink.recordMaxBufferedTimeMs",
        integer(0),
        1000,
        "Accepted for compatibility with the awslabs connector; no effect: rows are not held back to fill "
        "batches by time, a task sends its rows as soon as they are checked.",
        Side.SINK,
        unit="ms",
    )
)
