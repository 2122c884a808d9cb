"""``sink.writer``: the Spark-facing writers, called as Spark calls them but without Spark.

What they promise (the module's docstring, docs/sink.md): built on the driver, they check the options and the
DataFrame's columns there (a bad one fails before any task runs); pickled to each task, ``write()`` takes the task's
rows as Arrow RecordBatches, checks every row before anything is sent and returns the task's counts; ``commit()`` /
``abort()`` run on the driver with every task's message (None for a task that failed before reporting) and log the
totals, an abort as a WARNING saying that records already sent stay in the stream. On pyspark 4.1+ the stream
writer is a ``DataSourceStreamArrowWriter``.

Kinesis is moto's, in this process (``mock_aws``): real botocore calls, no server, no Spark. Aggregated records are
unpacked with aws-kinesis-agg, a reader independent of the connector.
"""

from __future__ import annotations

import logging
import pickle
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.datasource import DataSourceArrowWriter
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from pyspark_aws_kinesis.options import OptionError
from pyspark_aws_kinesis.sink import writer as writer_module
from pyspark_aws_kinesis.sink.columns import KinesisSinkInputError
from pyspark_aws_kinesis.sink.commit import SinkCommitMessage
from pyspark_aws_kinesis.sink.put_records import PutStats
from pyspark_aws_kinesis.sink.writer import KinesisBatchWriter, KinesisStreamWriter
from tests.connector.support.moto_sink_util import ROUTED, SCHEMA, Streams, expected, options, rows, stored

WRITERS = [KinesisBatchWriter, KinesisStreamWriter]

# --- write(): one task ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("writer_class", WRITERS)
def test_a_task_sends_every_row_once_and_reports_its_counts(kinesis: Streams, writer_class) -> None:
    writer = writer_class(SCHEMA, options(kinesis.orders, **{"kinesis.sink.aggregationEnabled": "false"}))
    message = writer.write(iter([rows(30), rows(20, "more")]))  # a task's rows come in several RecordBatches
    users, kinesis_records = stored(kinesis.client, kinesis.orders)
    assert users == expected(30) + expected(20, "more")
    assert kinesis_records == 50  # not aggregated: one Kinesis record a row
    assert isinstance(message, SinkCommitMessage)
    assert (message.streams, message.user_records, message.put.records) == ((kinesis.orders,), 50, 50)
    assert message.aggregates == 0
    assert message.put.calls >= 1
    assert message.partition_id is None  # outside a Spark task


def test_aggregation_packs_rows_into_fewer_kinesis_records(kinesis: Streams) -> None:
    """The default: KPL aggregates, one per target shard, that other readers (aws-kinesis-agg) unpack."""
    message = KinesisBatchWriter(SCHEMA, options(kinesis.orders)).write(iter([rows(200)]))
    users, kinesis_records = stored(kinesis.client, kinesis.orders)
    assert users == expected(200)
    assert kinesis_records <= 2  # 200 small rows fit one aggregate per shard of the 2
    assert message.user_records == 200 and message.put.records == kinesis_records
    assert 1 <= message.aggregates <= 2


def test_a_string_data_column_is_sent_as_its_utf8_bytes(kinesis: Streams) -> None:
    schema = StructType([StructField("data", StringType()), StructField("partitionKey", StringType())])
    batch = pa.RecordBatch.from_pydict({"data": ["café", "日本"], "partitionKey": ["a", "b"]})
    plain = options(kinesis.orders, **{"kinesis.sink.aggregationEnabled": "false"})
    KinesisBatchWriter(schema, plain).write(iter([batch]))
    assert stored(kinesis.client, kinesis.orders)[0] == Counter({("café".encode(), "a"): 1, ("日本".encode(), "b"): 1})


def test_without_the_stream_option_a_streamname_column_routes_each_row(kinesis: Streams) -> None:
    orders, returns = kinesis.orders, kinesis.returns
    batch = pa.RecordBatch.from_pydict(
        {"data": [b"o1", b"r1", b"o2"], "partitionKey": ["a", "b", "c"], "streamName": [orders, returns, orders]}
    )
    message = KinesisBatchWriter(ROUTED, options(stream=None)).write(iter([batch]))
    assert stored(kinesis.client, orders)[0] == Counter({(b"o1", "a"): 1, (b"o2", "c"): 1})
    assert stored(kinesis.client, returns)[0] == Counter({(b"r1", "b"): 1})
    assert sorted(message.streams) == sorted([orders, returns]) and message.user_records == 3


def test_the_stream_option_wins_over_a_streamname_column(kinesis: Streams) -> None:
    batch = pa.RecordBatch.from_pydict({"data": [b"x"], "partitionKey": ["a"], "streamName": [kinesis.returns]})
    KinesisBatchWriter(ROUTED, options(kinesis.orders)).write(iter([batch]))
    assert stored(kinesis.client, kinesis.orders)[0] == Counter({(b"x", "a"): 1})
    assert stored(kinesis.client, kinesis.returns)[0] == Counter()


def test_a_bad_row_fails_the_task_before_anything_is_sent(kinesis: Streams) -> None:
    good = rows(5)
    bad = pa.RecordBatch.from_pydict(
        {"data": [b"a", b"b", b"c"], "partitionKey": ["k", None, "k"]},
        schema=pa.schema([("data", pa.binary()), ("partitionKey", pa.string())]),
    )
    writer = KinesisBatchWriter(SCHEMA, options(kinesis.orders))
    with pytest.raises(KinesisSinkInputError, match=r"column 'partitionKey' is null or empty in 1 of 8 rows"):
        writer.write(iter([good, bad]))
    assert stored(kinesis.client, kinesis.orders) == (Counter(), 0)  # not even the good batch before it


@pytest.mark.parametrize("bad", [False, True], ids=["written", "failed"])
def test_a_task_hands_back_freed_memory_when_its_write_ends(
    kinesis: Streams, bad: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The task held its whole input (tests/connector/test_freed_memory.py), also when it failed."""
    releases: list[int] = []
    monkeypatch.setattr(writer_module, "release_freed_memory", lambda: releases.append(1))
    batch = rows(5)
    if bad:
        batch = pa.RecordBatch.from_pydict({"data": [b"a"], "partitionKey": [None]}, schema=batch.schema)
    writer = KinesisBatchWriter(SCHEMA, options(kinesis.orders))
    try:
        writer.write(iter([batch]))
    except KinesisSinkInputError:
        assert bad
    assert releases == [1]


def test_a_task_without_rows_makes_no_call(aws: Any) -> None:
    writer = KinesisBatchWriter(SCHEMA, options("no-such-stream"))  # any call would fail: the stream does not exist
    message = writer.write(iter([rows(0)]))
    assert (message.user_records, message.put.calls, message.streams) == (0, 0, ())
    assert writer.write(iter([])).put.calls == 0


@pytest.mark.parametrize("writer_class", WRITERS)
def test_the_writer_travels_pickled_to_its_tasks(kinesis: Streams, writer_class) -> None:
    writer = writer_class(SCHEMA, options(kinesis.orders, **{"kinesis.sink.aggregationEnabled": "false"}))
    shipped = pickle.loads(pickle.dumps(writer))
    assert (shipped.settings, shipped.columns) == (writer.settings, writer.columns)
    assert shipped.write(iter([rows(3)])).user_records == 3
    assert stored(kinesis.client, kinesis.orders)[0] == expected(3)


# --- the driver's checks -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("writer_class", WRITERS)
def test_a_missing_column_fails_on_the_driver_naming_it(writer_class) -> None:
    schema = StructType([StructField("data", BinaryType())])
    with pytest.raises(KinesisSinkInputError, match="column 'partitionKey' is missing"):
        writer_class(schema, options())


def test_no_stream_option_and_no_streamname_column_fails_on_the_driver() -> None:
    with pytest.raises(KinesisSinkInputError, match="streamName"):
        KinesisBatchWriter(SCHEMA, options(stream=None))


@pytest.mark.parametrize("writer_class", WRITERS)
def test_a_bad_option_fails_on_the_driver_naming_it_and_what_is_allowed(writer_class) -> None:
    with pytest.raises(OptionError) as info:
        writer_class(SCHEMA, options(**{"kinesis.sink.maxConnections": "0"}))
    assert "kinesis.sink.maxConnections='0'" in str(info.value)
    assert "an integer from 1 to 64" in str(info.value)


def test_a_secret_in_a_bad_option_set_is_not_echoed() -> None:
    with pytest.raises(OptionError) as info:
        KinesisBatchWriter(SCHEMA, options(**{"kinesis.sink.maxConnections": "lots"}))
    assert "wJalrXUtnFEMI" not in str(info.value) and "wJalrXUtnFEMI" not in repr(info.value)


# --- commit() and abort() on the driver ---------------------------------------------------------------------

TASK_MESSAGES = [
    SinkCommitMessage(0, ("orders",), 700, 2, PutStats(records=2, bytes=9000, calls=1)),
    SinkCommitMessage(1, ("returns",), 300, 1, PutStats(records=1, bytes=4000, calls=2, retried_entries=1)),
    None,  # a task that failed before reporting
]


def driver_writer(writer_class: type) -> Any:
    return writer_class(SCHEMA, options())


def test_a_batch_write_commit_logs_the_summed_counts(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="pyspark_aws_kinesis.sink"):
        driver_writer(KinesisBatchWriter).commit(TASK_MESSAGES)
    (record,) = caplog.records
    assert record.levelno == logging.INFO
    assert record.getMessage().startswith(
        "aws-kinesis sink: batch write committed: 2 tasks wrote 1000 records in 3 Kinesis records (3 aggregates, "
        "13000 bytes) to orders, returns; 3 PutRecords calls, 1 entries and 0 calls retried"
    )


def test_a_batch_write_abort_warns_that_what_was_sent_stays(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="pyspark_aws_kinesis.sink"):
        driver_writer(KinesisBatchWriter).abort(TASK_MESSAGES)
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith(
        "aws-kinesis sink: batch write aborted (records already sent stay in the stream): 2 tasks wrote 1000 records"
    )


def test_a_stream_writer_names_the_micro_batch(caplog: pytest.LogCaptureFixture) -> None:
    writer = driver_writer(KinesisStreamWriter)
    with caplog.at_level(logging.INFO, logger="pyspark_aws_kinesis.sink"):
        writer.commit(TASK_MESSAGES, 12)
        writer.abort([None], 13)
    committed, aborted = caplog.records
    assert (committed.levelno, aborted.levelno) == (logging.INFO, logging.WARNING)
    assert "batch 12 committed: 2 tasks wrote 1000 records" in committed.getMessage()
    assert "batch 13 aborted (records already sent stay in the stream): 0 tasks wrote 0 records" in aborted.getMessage()


def test_the_writers_are_arrow_writers_spark_knows() -> None:
    """Both take Arrow RecordBatches; on pyspark 4.1+ the stream writer is a DataSourceStreamArrowWriter."""
    assert issubclass(KinesisBatchWriter, DataSourceArrowWriter)
    from pyspark_aws_kinesis.compat import PYSPARK_VERSION

    if PYSPARK_VERSION >= (4, 1):
        from pyspark.sql.datasource import DataSourceStreamArrowWriter

        assert issubclass(KinesisStreamWriter, DataSourceStreamArrowWriter)
    else:
        from pyspark.sql.datasource import DataSourceStreamWriter

        assert issubclass(KinesisStreamWriter, DataSourceStreamWriter)
        assert issubclass(KinesisStreamWriter, DataSourceArrowWriter)
