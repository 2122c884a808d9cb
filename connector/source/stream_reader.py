"""The streaming reader: plans micro-batches on the driver, reads shards on executors, with exact replay.

Who calls it: Spark. On the driver, one long-lived reader per query: ``initialOffset`` (new query only),
``latestOffset`` every trigger, ``partitions(start, end)`` for each batch (also when a batch runs again),
``commit(end)``, ``prepareForTriggerAvailableNow`` and ``reportLatestOffset``; these only forward to
``query_offsets``. On executors: ``read(partition)`` on an unpickled copy of the reader, which reads the partition's
shards and records where each stopped in the metadata store, so a batch that runs again stops at exactly the same
record (docs/source.md, "Offsets, the metadata store and exact replay").
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from .. import options as opts
from ..clock import now_ms
from ..compat import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow
from ..fetch.range import FetchLimits, ShardTask
from ..fetch.reads import ShardRead
from ..freed_memory import release_freed_memory
from ..options import OptionError
from .guards import MetadataNotSharedError, MissingMetadataError, check_store_shared
from .offsets import INITIAL_BATCH
from .query_offsets import QueryOffsets, as_dict
from .settings import SourceSettings
from .side_by_side import side_by_side

log = logging.getLogger(__name__)


__all__ = ["INITIAL_BATCH", "KinesisPartition", "KinesisStreamReader", "MetadataNotSharedError", "MissingMetadataError"]


@dataclass(frozen=True)
class KinesisPartition(InputPartition):
    """One Spark task: read ``tasks`` (one shard each) for batch ``batch_id`` and record where each stopped."""

    batch_id: int
    source_id: str
    metadata_path: str
    tasks: tuple[ShardTask, ...]
    until_ms: int | None = None  # records that arrived after this wait for a later batch
    source_document: bool = False  # the driver wrote the source document: check this executor sees it
    consumers: tuple[tuple[str, str], ...] = ()  # (stream, enhanced fan-out consumer ARN): SubscribeToShard

    def consumer_arn(self, stream: str) -> str | None:
        """The ARN to subscribe through for ``stream``; None: read with GetRecords."""
        return dict(self.consumers).get(stream)


class KinesisStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("aws-kinesis")``: see the module doc."""

    def __init__(self, schema: StructType, options: dict[str, str]):
        self.settings = SourceSettings.from_options(options)
        if self.settings.ending_given:
            # schema() cannot tell a streaming load() from a batch one: the first place that knows is here.
            raise OptionError(
                f"option {opts.ENDING_POSITION.name} is for batch reads (spark.read) only: a streaming read has no "
                "end; remove it, or stop at what the stream holds now with .trigger(availableNow=True)"
            )
        self._offsets: QueryOffsets | None = None  # driver only, made on first use

    def __getstate__(self) -> dict[str, Any]:
        # Executors get a pickled copy: they need the settings, not the driver's planner (threads, caches).
        return {**self.__dict__, "_offsets": None}

    @property
    def offsets(self) -> QueryOffsets:
        if self._offsets is None:
            self._offsets = QueryOffsets(self.settings)
        return self._offsets

    # --- driver: offsets ------------------------------------------------------------------------------------

    def initialOffset(self) -> dict[str, Any]:
        """Where a new query starts: the starting positions of every shard listed now (LATEST = now)."""
        initial = self.offsets.initial()
        log.info(
            "aws-kinesis source %s starts %d shards; metadata in %s",
            initial.source_id,
            len(initial.shards),
            initial.metadata_path,
        )
        return as_dict(initial)

    def getDefaultReadLimit(self) -> Any:
        """pyspark 4.2+: ``kinesis.maxRecordsPerTrigger`` as Spark's ReadMaxRows, else read all available."""
        cap = self.settings.max_records_per_trigger
        return ReadMaxRows(cap) if cap is not None else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """``Trigger.AvailableNow`` (pyspark 4.2+): read what arrived until now, in as many batches as limits
        need, then report no new data so that Spark stops the query."""
        self.offsets.available_now_ms = now_ms()
        log.info("aws-kinesis AvailableNow: reading records that arrived until %d ms", self.offsets.available_now_ms)

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict[str, Any]:
        """The next batch's offset, or ``start`` itself when no shard has records waiting (pyspark 4.0.2 passes
        no arguments: see ``query_offsets``)."""
        return self.offsets.latest(start, self._max_rows(limit))

    def _max_rows(self, limit: Any) -> int | None:
        if limit is None:  # pyspark 4.0.2: no read limits, the option alone
            return self.settings.max_records_per_trigger
        return limit.max_rows if isinstance(limit, ReadMaxRows) else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """Offsets -> plan -> one partition per ``kinesis.shardsPerPartition`` shards that batch ``end`` reads."""
        if start == end:
            return []
        offset = self.offsets.batch(start, end)
        tasks = self.offsets.tasks(offset)
        consumers = tuple(sorted(self.offsets.consumer_arns().items()))
        size = self.settings.shards_per_partition
        return [
            KinesisPartition(
                offset.batch_id,
                offset.source_id,
                offset.metadata_path,
                tuple(tasks[i : i + size]),
                offset.until_ms,
                offset.source_document,
                consumers,
            )
            for i in range(0, len(tasks), size)
        ]

    def commit(self, end: dict) -> None:
        """Spark finished the batch ending at ``end``: purge batches older than ``kinesis.minBatchesToRetain``."""
        offset = self.offsets.committed(end)
        keep_from = offset.batch_id - self.settings.min_batches_to_retain + 1
        if keep_from > 0:
            self.settings.metadata_store(offset.metadata_path).purge(offset.source_id, keep_from)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """pyspark 4.2+ shows this as the source's ``latestOffset`` in the query progress: millisBehindLatest
        per shard and its maximum, records dropped outside their shard's hash range and data-loss events (the
        only channel a Python source has into the progress)."""
        return self._offsets.progress_report() if self._offsets is not None else None

    # --- executors: reading -----------------------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read the partition's shards side by side (``side_by_side``: a thread each, a bounded queue), replaying
        the recorded range of a shard when this batch ran before. A shard's read is recorded here, once Spark has
        taken all its rows: a task stopped early (a ``limit``, a kill) records no unfinished shard."""
        assert isinstance(partition, KinesisPartition)
        store = self.settings.metadata_store(partition.metadata_path)
        check_store_shared(store, partition.metadata_path, partition.source_id, partition.source_document)
        limits = self._limits(partition.until_ms)
        shards = [functools.partial(self._read_shard, store, partition, task, limits) for task in partition.tasks]
        for item in side_by_side(shards, f"read {partition.batch_id}"):
            if isinstance(item, ShardRead):
                store.record_shard_read(partition.source_id, partition.batch_id, item)
            else:
                yield item
        release_freed_memory()

    def _read_shard(
        self, store: Any, partition: KinesisPartition, task: ShardTask, limits: FetchLimits
    ) -> Iterator[pa.RecordBatch | ShardRead]:
        """One shard's RecordBatches, then where its read stopped (for the caller to record), unless this batch's
        read of it was recorded before (a replay: it stops exactly there)."""
        recorded = store.get_shard_read(partition.source_id, partition.batch_id, task.stream, task.shard_id)
        arn = partition.consumer_arn(task.stream)
        shard_range, transport = self.settings.shard_reader(task, limits, arn, replay=recorded)
        yield from shard_range.batches(transport)
        assert shard_range.result is not None
        if recorded is None:
            yield shard_range.result

    def _limits(self, until_ms: int | None) -> FetchLimits:
        return FetchLimits.of_batch(self.settings.max_fetch_records, self.settings.max_fetch_time_s, until_ms)

    def stop(self) -> None:
        """Deregister the query's enhanced fan-out consumers when ``kinesis.requireConsumerDeregistration`` is
        true; clients are per process. Spark rarely calls this (it ends the driver's Python process instead:
        docs/source.md, "Costs and clean-up"), so ``consumers.QueryConsumers`` also deregisters at that
        process's exit."""
        if self._offsets is not None:
            self._offsets.release()
