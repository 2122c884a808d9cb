"""The streaming reader: plans micro-batches on the driver, reads shards on executors, with exact replay.

Who calls what (see docs/source.md for the full story):
- Driver, one long-lived reader per query: ``initialOffset`` (new query only), ``latestOffset`` every trigger,
  ``partitions(start, end)`` for each batch (also when a batch runs again after a restart), ``commit(end)``;
  with ``Trigger.AvailableNow`` first ``prepareForTriggerAvailableNow``; ``reportLatestOffset`` for progress.
- Executors: ``read(partition)`` on an unpickled copy of the reader; everything it needs is in the partition.

Offsets (``connector.offsets``): batch ``k``'s offset holds the position each shard starts at in batch ``k``
and which shards it reads. Executors record where they stopped in the metadata store under (source id, batch
id, shard); ``connector.planner`` builds batch ``k+1``'s offset from batch ``k``'s records, and answers "no new
batch" (the start offset itself) while no shard has records waiting. A batch that runs again (task retry,
restart before commit) finds its records and stops at exactly the same record, whatever the limits say.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from connector import options as opts
from connector.aws import kinesis_reader_client
from connector.compat import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow
from connector.fetch.range import FetchLimits, ShardRange, ShardTask, now_ms
from connector.metadata.store import MetadataStore
from connector.offsets import KinesisOffset, PendingOffset, parse_offset, split_shard_key
from connector.planner import (
    INITIAL_BATCH,
    BatchPlanner,
    MissingMetadataError,
    check_pinned,
    lost_store_message,
    source_document_name,
)
from connector.source_settings import SourceSettings

log = logging.getLogger(__name__)

__all__ = ["INITIAL_BATCH", "KinesisPartition", "KinesisStreamReader", "MetadataNotSharedError", "MissingMetadataError"]

_seen_sources: set[tuple[str, str]] = set()  # (metadata path, source id) whose document this process has seen


class MetadataNotSharedError(RuntimeError):
    """An executor does not see the metadata store the driver writes to."""


@dataclass(frozen=True)
class KinesisPartition(InputPartition):
    """One Spark task: read ``tasks`` (one shard each) for batch ``batch_id`` and record where each stopped."""

    batch_id: int
    source_id: str
    metadata_path: str
    tasks: tuple[ShardTask, ...]
    until_ms: int | None = None  # records that arrived after this wait for a later batch
    source_document: bool = False  # the driver wrote the source document: check this executor sees it


def check_store_shared(store: MetadataStore, partition: KinesisPartition) -> None:
    """Fail when this executor does not see the source document the driver wrote (once per process and source)."""
    seen = (partition.metadata_path, partition.source_id)
    if not partition.source_document or seen in _seen_sources:
        return
    if store.get_document(source_document_name(partition.source_id)) is None:
        raise MetadataNotSharedError(
            f"this executor does not see the metadata store the driver writes to: {opts.METADATA_PATH.name}="
            f"{partition.metadata_path!r} is not shared between driver and executors (unset, it is a local temp "
            "directory, which works only when they share one machine). Set it to a store every executor reaches: "
            "s3://bucket/prefix, hdfs://namenode/path, a shared mount, or use kinesis.metadataCommitterType=DYNAMODB"
        )
    _seen_sources.add(seen)


def _as_dict(offset: KinesisOffset | PendingOffset) -> dict[str, Any]:
    return json.loads(offset.to_json())


class KinesisStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("aws-kinesis")``: see the module doc."""

    def __init__(self, schema: StructType, options: dict[str, str]):
        self.settings = SourceSettings.from_options(options)
        self._planner: BatchPlanner | None = None  # driver only, made on first use
        self._initial: KinesisOffset | None = None
        self._last: KinesisOffset | None = None  # the end of the last batch planned or committed ...
        self._last_raw: dict[str, Any] | None = None  # ... as Spark knows it (a pending offset stays pending)
        self._pending: PendingOffset | None = None
        self._available_now_ms: int | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Executors get a pickled copy: they need the settings, not the driver's planner (threads, caches).
        return {**self.__dict__, "_planner": None}

    @property
    def planner(self) -> BatchPlanner:
        if self._planner is None:
            self._planner = BatchPlanner(self.settings)
        return self._planner

    # --- driver: offsets ------------------------------------------------------------------------------------

    def initialOffset(self) -> dict[str, Any]:
        """Where a new query starts: the starting positions of every shard listed now (LATEST = now)."""
        if self._initial is None:  # Spark may ask twice; the answer must not change
            self._initial = self.planner.initial(uuid.uuid4().hex, self.settings.metadata_path)
            log.info(
                "aws-kinesis source %s starts %d shards; metadata in %s",
                self._initial.source_id,
                len(self._initial.shards),
                self._initial.metadata_path,
            )
        return _as_dict(self._initial)

    def getDefaultReadLimit(self) -> Any:
        """pyspark 4.2+: ``kinesis.maxRecordsPerTrigger`` as Spark's ReadMaxRows, else read all available."""
        cap = self.settings.max_records_per_trigger
        return ReadMaxRows(cap) if cap is not None else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """``Trigger.AvailableNow`` (pyspark 4.2+): read what arrived until now, in as many batches as limits
        need, then report no new data so that Spark stops the query."""
        self._available_now_ms = now_ms()
        log.info("aws-kinesis AvailableNow: reading records that arrived until %d ms", self._available_now_ms)

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict[str, Any]:
        """The next batch's offset, or ``start`` itself when no shard has records waiting.

        pyspark 4.2+ passes ``start`` and Spark's read limit; 4.0.2 passes nothing, so the reader uses the last
        offset it planned, or, right after a (re)start, a pending offset that ``partitions`` resolves.
        """
        if start is not None:
            base, known = self._resolve(parse_offset(start)), start
        else:
            base, known = self._last, self._last_raw
        if base is None:
            if self._pending is None:
                self._pending = PendingOffset(uuid.uuid4().hex, self.settings.metadata_path)
            return _as_dict(self._pending)
        planned = self.planner.next(base, self._max_rows(limit), self._available_now_ms)
        if planned is None:
            return known if known is not None else _as_dict(base)
        return _as_dict(planned)

    def _max_rows(self, limit: Any) -> int | None:
        if limit is None:  # pyspark 4.0.2: no read limits, the option alone
            return self.settings.max_records_per_trigger
        return limit.max_rows if isinstance(limit, ReadMaxRows) else None

    def _resolve(self, offset: KinesisOffset | PendingOffset, start: Any = None) -> KinesisOffset:
        """A real offset for ``offset``: pending ones are resolved from ``start`` once, then from the store."""
        if isinstance(offset, KinesisOffset):
            return offset
        store = self.settings.metadata_store(offset.metadata_path)
        recorded = store.get_document(offset.nonce)
        if recorded is None:
            if start is None:
                raise MissingMetadataError(
                    lost_store_message(offset.metadata_path, offset.nonce, "resolution of the pending offset")
                )
            base = self._resolve(parse_offset(start))
            resolved = self.planner.next(
                base, self.settings.max_records_per_trigger, self._available_now_ms, force=True
            )
            assert resolved is not None
            recorded = store.put_document(offset.nonce, _as_dict(resolved))  # first resolution wins
        return parse_offset(recorded)  # type: ignore[return-value]

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """One partition per ``kinesis.shardsPerPartition`` shards that batch ``end`` reads."""
        if start == end:
            return []
        offset = self._resolve(parse_offset(end), start)
        check_pinned(offset, self.settings.pinned)  # a batch that runs again after a restart reads the same rows
        self._remember(offset, end)
        tasks = []
        for key, position in offset.active().items():
            stream, shard_id = split_shard_key(key)
            low, high = self.planner.catalog.hash_range(stream, shard_id)
            tasks.append(ShardTask(stream, shard_id, low, high, position, offset.max_records.get(key)))
        size = self.settings.shards_per_partition
        return [
            KinesisPartition(
                offset.batch_id,
                offset.source_id,
                offset.metadata_path,
                tuple(tasks[i : i + size]),
                offset.until_ms,
                offset.source_document,
            )
            for i in range(0, len(tasks), size)
        ]

    def _remember(self, offset: KinesisOffset, raw: dict[str, Any]) -> None:
        if self._last is None or offset.batch_id >= self._last.batch_id:
            self._last, self._last_raw = offset, raw

    def commit(self, end: dict) -> None:
        """Spark finished the batch ending at ``end``: purge batches older than ``kinesis.minBatchesToRetain``."""
        offset = self._resolve(parse_offset(end))
        self._remember(offset, end)
        keep_from = offset.batch_id - self.settings.min_batches_to_retain + 1
        if keep_from > 0:
            self.settings.metadata_store(offset.metadata_path).purge(offset.source_id, keep_from)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """pyspark 4.2+ shows this as the source's ``latestOffset`` in the query progress: millisBehindLatest
        per shard and its maximum, records dropped outside their shard's hash range and data-loss events (the
        only channel a Python source has into the progress)."""
        return self._planner.progress_report() if self._planner is not None else None

    # --- executors: reading -----------------------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read each shard of the partition, replaying the recorded range when this batch ran before."""
        assert isinstance(partition, KinesisPartition)
        store = self.settings.metadata_store(partition.metadata_path)
        check_store_shared(store, partition)
        client = kinesis_reader_client(self.settings.client)
        limits = self._limits(partition.until_ms)
        for task in partition.tasks:
            recorded = store.get_shard_read(partition.source_id, partition.batch_id, task.stream, task.shard_id)
            shard_range = ShardRange(
                task,
                limits,
                self.settings.shard_context(task),
                recorded,
                fail_on_data_loss=self.settings.fail_on_data_loss,
            )
            yield from shard_range.batches(self.settings.transport(client, task))
            assert shard_range.result is not None
            if recorded is None:
                store.record_shard_read(partition.source_id, partition.batch_id, shard_range.result)

    def _limits(self, until_ms: int | None) -> FetchLimits:
        return FetchLimits(self.settings.max_fetch_records, self.settings.max_fetch_time_s, until_ms)

    def stop(self) -> None:
        """Nothing to release: clients are per process, and Spark rarely calls this (NOTES.md)."""
