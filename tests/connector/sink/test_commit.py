"""``pyspark_aws_kinesis.sink.commit``: what tasks report to the driver and the line the writers log: the batch's
counts, the calls that met a quota and the wait, re-sent records after a reshard, and what an abort had sent."""

from __future__ import annotations

import logging

import pytest

from pyspark_aws_kinesis.sink import KinesisStreamWriter
from pyspark_aws_kinesis.sink.commit import SinkCommitMessage, summarize
from pyspark_aws_kinesis.sink.put_records import PutStats
from tests.connector.support.sink_util import sink_options


def test_the_commit_line_counts_the_calls_that_met_a_quota_and_the_wait() -> None:
    message = SinkCommitMessage(0, ("s",), 10, 0, PutStats(records=10, calls=3, throttled_calls=1, paced_s=0.75))
    assert "; 1 calls met a shard's write quota, 0.75 s of the sending spent waiting" in message.describe()
    assert "write quota" not in SinkCommitMessage(0, ("s",), 10, 0, PutStats(records=10, calls=1)).describe()


def test_the_commit_message_counts_and_describes_re_sent_records() -> None:
    messages = [
        SinkCommitMessage(0, ("s",), user_records=10, aggregates=1, resent_records=4, put=PutStats(records=2)),
        SinkCommitMessage(1, ("s",), user_records=5, aggregates=1, resent_records=1, put=PutStats(records=1)),
        None,
    ]
    total, tasks = summarize(messages)
    assert (tasks, total.user_records, total.resent_records) == (2, 15, 5)
    assert "5 records re-sent after their aggregates landed on a shard that does not hold them" in total.describe()
    assert "re-sent" not in SinkCommitMessage(0, ("s",), user_records=1).describe()


def test_the_commit_line_says_that_entries_of_unanswered_calls_may_be_in_the_stream_twice() -> None:
    message = SinkCommitMessage(0, ("s",), 10, 0, PutStats(records=10, calls=2, unanswered_entries=4))
    assert "; 4 entries were in calls that failed without an answer" in message.describe()
    assert "twice" in message.describe()
    assert "unanswered" not in SinkCommitMessage(0, ("s",), 1, 0, PutStats(records=1, calls=1)).describe()


TASK_MESSAGES = [
    SinkCommitMessage(0, ("s",), 700, 2, PutStats(records=2, bytes=9000, calls=1)),
    SinkCommitMessage(1, ("s",), 300, 1, PutStats(records=1, bytes=4000, calls=2, retried_entries=1)),
    None,  # a task that failed before reporting
]


def _stream_writer() -> KinesisStreamWriter:
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType

    schema = StructType([StructField("data", BinaryType()), StructField("partitionKey", StringType())])
    return KinesisStreamWriter(schema, sink_options("http://127.0.0.1:1", "s"))


def test_commit_logs_the_batch_counts(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="pyspark_aws_kinesis.sink"):
        _stream_writer().commit(TASK_MESSAGES, 42)
    assert (
        "batch 42 committed: 2 tasks wrote 1000 records in 3 Kinesis records (3 aggregates, 13000 bytes) to s; "
        "3 PutRecords calls, 1 entries and 0 calls retried" in caplog.text
    )


def test_abort_warns_with_what_was_already_sent(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="pyspark_aws_kinesis.sink"):
        _stream_writer().abort(TASK_MESSAGES, 7)
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert "batch 7 aborted (records already sent stay in the stream): 2 tasks wrote 1000 records" in record.message
