"""What tasks report to the driver: ``write()`` in ``pyspark_aws_kinesis.sink.task`` fills a ``SinkCommitMessage``, the
writers' ``commit()`` / ``abort()`` in ``pyspark_aws_kinesis.sink.writer`` sum them with ``summarize`` and log the total
on the sink's one logger, ``pyspark_aws_kinesis.sink``."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field

from pyspark.sql.datasource import WriterCommitMessage

from .put_records import PutStats

log = logging.getLogger(__package__)  # "pyspark_aws_kinesis.sink": one logger for the sink's driver and tasks


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    """What one task wrote: returned by ``write()`` in the task, handed to ``commit()`` on the driver."""

    partition_id: int | None
    streams: tuple[str, ...] = ()
    user_records: int = 0  # rows written
    aggregates: int = 0  # Kinesis records that carry more than one row (re-sent ones included)
    put: PutStats = field(default_factory=PutStats)  # Kinesis records, bytes, calls, retries
    resent_records: int = 0  # rows sent again because their aggregate landed on a shard not holding them
    query_id: str | None = None  # the streaming query's id (kinesis.sink.skipReplayedPartitions: whose notes)
    skipped_records: int = 0  # rows not sent: an earlier attempt of this batch wrote the partition whole
    skipped_partitions: int = 0
    rewritten_partitions: int = 0  # an earlier attempt wrote the partition whole, but with other rows: sent again

    def describe(self) -> str:
        put = self.put
        resent = (
            f"; {self.resent_records} records re-sent after their aggregates landed on a shard that does not hold "
            f"them (the stream was resharded while writing)"
            if self.resent_records
            else ""
        )
        throttled = (
            f"; {put.throttled_calls} calls met a shard's write quota, {put.paced_s:.2f} s of the sending spent "
            f"waiting for the shards to have room"
            if put.throttled_calls or put.paced_s
            else ""
        )
        unanswered = (
            f"; {put.unanswered_entries} entries were in calls that failed without an answer (a timeout or a 5xx): "
            f"sent again, they may be in the stream twice"
            if put.unanswered_entries
            else ""
        )
        skipped = (
            f"; {self.skipped_records} records in {self.skipped_partitions} partitions not sent again: an earlier "
            f"attempt of this batch wrote them whole"
            if self.skipped_partitions
            else ""
        )
        rewritten = (
            f"; {self.rewritten_partitions} partitions written again although an earlier attempt of this batch "
            f"wrote them whole: they held other rows this time (a plan that is not deterministic)"
            if self.rewritten_partitions
            else ""
        )
        return (
            f"{self.user_records} records in {put.records} Kinesis records ({self.aggregates} aggregates, "
            f"{put.bytes} bytes) to {', '.join(self.streams) or 'no stream'}; {put.calls} PutRecords calls, "
            f"{put.retried_entries} entries and {put.retried_calls} calls retried, "
            f"{put.elapsed_s:.2f} s sending (summed over tasks){throttled}{resent}{unanswered}{skipped}{rewritten}"
        )


def summarize(messages: Iterable[WriterCommitMessage | None]) -> tuple[SinkCommitMessage, int]:
    """All tasks' counts summed into one message, and how many tasks reported."""
    total = SinkCommitMessage(partition_id=None)
    streams: set[str] = set()
    tasks = 0
    for message in messages:
        if not isinstance(message, SinkCommitMessage):
            continue  # a task that failed before reporting sends None
        tasks += 1
        streams.update(message.streams)
        total.user_records += message.user_records
        total.aggregates += message.aggregates
        total.resent_records += message.resent_records
        total.skipped_records += message.skipped_records
        total.skipped_partitions += message.skipped_partitions
        total.rewritten_partitions += message.rewritten_partitions
        total.query_id = total.query_id or message.query_id
        total.put += message.put
    total.streams = tuple(sorted(streams))
    return total, tasks


def log_to_stderr_if_unconfigured() -> None:
    """Spark's Python workers configure no logging; without a handler our INFO lines would vanish."""
    if not log.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
