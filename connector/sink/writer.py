"""The Spark-facing writers: ``df.write.format("aws-kinesis")`` and ``df.writeStream.format("aws-kinesis")``.

``pyspark_aws_kinesis.datasource.KinesisDataSource.writer()`` / ``streamWriter()`` build them on the driver when the
query is planned: the options (``pyspark_aws_kinesis.sink.settings``) and the DataFrame's columns
(``pyspark_aws_kinesis.sink.columns``) are checked there. Spark pickles the writer to each task, whose ``write()`` runs
``pyspark_aws_kinesis.sink.task.write_task``; ``commit()`` / ``abort()`` run on the driver with every task's
``SinkCommitMessage`` and log the counts. With ``kinesis.sink.skipReplayedPartitions`` the stream writer also writes,
when built, the document executors check the notes' store by, and purges older batches' notes at each commit
(``pyspark_aws_kinesis.sink.replay``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from ..compat import STREAM_ARROW_WRITER_BASES
from ..freed_memory import release_freed_memory
from ..options import SKIP_REPLAYED_PARTITIONS, OptionError
from .columns import resolve_columns
from .commit import SinkCommitMessage, log, log_to_stderr_if_unconfigured, summarize
from .settings import SinkSettings, sink_settings
from .task import write_task


class _KinesisWriter:
    """Shared by both writers: built on the driver (columns and options checked there), pickled to tasks."""

    def __init__(self, schema: StructType, options: Mapping[str, str]):
        self.settings = sink_settings(options)
        self.columns = resolve_columns(schema, self.settings.stream_name)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        try:
            return write_task(iterator, self.columns, self.settings)
        finally:
            release_freed_memory()  # the task held its whole input (sink.task._collect)


class KinesisBatchWriter(_KinesisWriter, DataSourceArrowWriter):
    """``df.write.format("aws-kinesis")``: one job, every task's counts logged when Spark commits."""

    def __init__(self, schema: StructType, options: Mapping[str, str]):
        super().__init__(schema, options)
        if self.settings.replay is not None:
            raise OptionError(
                f"option {SKIP_REPLAYED_PARTITIONS.name} applies to writeStream only: it skips partitions of a "
                "micro-batch that Spark runs again, and df.write has none; remove it"
            )

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _log_outcome("batch write committed", messages)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _log_outcome("batch write aborted (records already sent stay in the stream)", messages, logging.WARNING)


class KinesisStreamWriter(_KinesisWriter, *STREAM_ARROW_WRITER_BASES):
    """``df.writeStream.format("aws-kinesis")``: each micro-batch's counts logged with its batch id."""

    def __init__(self, schema: StructType, options: Mapping[str, str]):
        super().__init__(schema, options)
        if self.settings.replay is not None:
            self.settings.replay.announce(self.settings.client)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total = _log_outcome(f"batch {batchId} committed", messages)
        if self.settings.replay is not None:
            _purge_notes(self.settings, total.query_id, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log_outcome(f"batch {batchId} aborted (records already sent stay in the stream)", messages, logging.WARNING)


def _purge_notes(settings: SinkSettings, query_id: str | None, batch_id: int) -> None:
    """Delete the notes of the batches before ``batch_id``; a failure leaves them to the next commit's purge."""
    if query_id is None or settings.replay is None:
        return  # no task of this batch ran in a micro-batch (no rows): the next batch's commit purges
    try:
        settings.replay.purge(settings.client, query_id, batch_id)
    except Exception as exc:
        log_to_stderr_if_unconfigured()
        log.warning("aws-kinesis sink: could not delete the notes of batches before %d: %s", batch_id, exc)


def _log_outcome(what: str, messages: list[WriterCommitMessage | None], level: int = logging.INFO) -> SinkCommitMessage:
    """Log the tasks' counts summed; returns the sum."""
    log_to_stderr_if_unconfigured()
    total, tasks = summarize(messages)
    log.log(level, "aws-kinesis sink: %s: %d tasks wrote %s", what, tasks, total.describe())
    return total
