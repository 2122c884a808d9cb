"""The streaming reader: plans micro-batches on the driver, reads shards on executors, with exact replay.

Who calls what (see docs/source.md for the full story):
- Driver, one long-lived reader per query: ``initialOffset`` (new query only), ``latestOffset`` every trigger,
  ``partitions(start, end)`` for each batch (also when a batch runs again after a restart), ``commit(end)``.
- Executors: ``read(partition)`` on an unpickled copy of the reader; everything it needs is in the partition.

Offsets (``connector.offsets``): batch ``k``'s offset holds the position each shard starts at in batch ``k``.
Executors record where they stopped in the metadata store under (source id, batch id, shard); the driver builds
batch ``k+1``'s offset from batch ``k``'s records. A batch that runs again (task retry, restart before commit)
finds its records and stops at exactly the same record, whatever the time or record limits say.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from connector.aws import kinesis_client
from connector.decode import ShardContext
from connector.fetch.polling import FetchLimits, ShardFetcher, ShardTask, now_ms
from connector.metadata.store import MetadataStore, open_store
from connector.offsets import (
    AT_TIMESTAMP,
    LATEST,
    TRIM_HORIZON,
    KinesisOffset,
    PendingOffset,
    Position,
    parse_offset,
    shard_key,
    split_shard_key,
)
from connector.shards import ShardCatalog
from connector.source_settings import SourceSettings

log = logging.getLogger(__name__)
INITIAL_BATCH = -1  # the initial offset's batch id: no batch reads it, batch 0 starts at its positions


class MissingMetadataError(RuntimeError):
    """The metadata store has no record of where the previous batch stopped on a shard."""


@dataclass(frozen=True)
class KinesisPartition(InputPartition):
    """One Spark task: read ``tasks`` (one shard each) for batch ``batch_id`` and record where each stopped."""

    batch_id: int
    source_id: str
    metadata_path: str
    tasks: tuple[ShardTask, ...]


def shard_context(settings: SourceSettings, task: ShardTask) -> ShardContext:
    return ShardContext(
        task.stream,
        task.shard_id,
        task.starting_hash_key,
        task.ending_hash_key,
        settings.deaggregate,
        settings.pass_through_corrupt,
    )


def make_store(settings: SourceSettings, path: str) -> MetadataStore:
    return open_store(path, settings.client, settings.metadata_s3_endpoint_url)


def _as_dict(offset: KinesisOffset | PendingOffset) -> dict[str, Any]:
    import json

    return json.loads(offset.to_json())


class KinesisStreamReader(DataSourceStreamReader):
    """``spark.readStream.format("aws-kinesis")``: see the module doc."""

    def __init__(self, schema: StructType, options: dict[str, str]):
        self.settings = SourceSettings.from_options(options)
        self._catalog = ShardCatalog(
            functools.partial(kinesis_client, self.settings.client),
            self.settings.client.retry,
            self.settings.describe_shard_interval_s,
        )
        self._initial: KinesisOffset | None = None
        self._last: KinesisOffset | None = None  # the end of the last batch planned or committed
        self._pending: PendingOffset | None = None

    # --- driver: offsets ------------------------------------------------------------------------------------

    def initialOffset(self) -> dict[str, Any]:
        """Where a new query starts: the starting positions of every shard listed now (LATEST = now)."""
        if self._initial is None:  # Spark may ask twice; the answer must not change
            self._initial = self._make_initial()
        return _as_dict(self._initial)

    def _make_initial(self) -> KinesisOffset:
        now = now_ms()
        positions: dict[str, Position] = {}
        for stream in self.settings.streams:
            for shard in self._catalog.shards(stream, fresh=True):
                position = self.settings.starting.for_shard(stream, shard.shard_id)
                if position.kind == LATEST:
                    # A LATEST iterator cannot be replayed; the arrival time it stands for can.
                    position = Position(AT_TIMESTAMP, timestamp_ms=now)
                positions[shard_key(stream, shard.shard_id)] = position
        source_id = uuid.uuid4().hex
        log.info("aws-kinesis source %s starts %d shards; metadata in %s", source_id, len(positions), self._path)
        return KinesisOffset(source_id, self._path, INITIAL_BATCH, positions)

    @property
    def _path(self) -> str:
        return self.settings.metadata_path

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict[str, Any]:
        """The next batch's offset. pyspark 4.2+ passes ``start``; 4.0.2 passes nothing, so the reader uses
        the last offset it planned, or, right after a (re)start, a pending offset that ``partitions`` resolves."""
        base = self._resolve(parse_offset(start)) if start is not None else self._last
        if base is None:
            if self._pending is None:
                self._pending = PendingOffset(uuid.uuid4().hex, self._path)
            return _as_dict(self._pending)
        return _as_dict(self._next_offset(base))

    def _next_offset(self, base: KinesisOffset) -> KinesisOffset:
        """Batch ``base.batch_id + 1``: each shard continues where batch ``base`` stopped; new shards (children
        of a reshard) start at TRIM_HORIZON."""
        positions = dict(base.shards)
        if base.batch_id != INITIAL_BATCH:
            store = make_store(self.settings, base.metadata_path)
            for key in base.active():
                stream, shard_id = split_shard_key(key)
                read = store.get_shard_read(base.source_id, base.batch_id, stream, shard_id)
                if read is None:
                    raise MissingMetadataError(
                        f"no record of where batch {base.batch_id} stopped reading stream '{stream}' shard "
                        f"{shard_id} in {base.metadata_path} (source {base.source_id}); was kinesis.metadataPath "
                        "changed, deleted or not shared between driver and executors?"
                    )
                positions[key] = read.next_start()
        for stream in self.settings.streams:
            for shard in self._catalog.shards(stream):
                positions.setdefault(shard_key(stream, shard.shard_id), Position(TRIM_HORIZON))
        return KinesisOffset(base.source_id, base.metadata_path, base.batch_id + 1, positions)

    def _resolve(self, offset: KinesisOffset | PendingOffset, start: Any = None) -> KinesisOffset:
        """A real offset for ``offset``: pending ones are resolved from ``start`` once, then from the store."""
        if isinstance(offset, KinesisOffset):
            return offset
        store = make_store(self.settings, offset.metadata_path)
        recorded = store.get_document(offset.nonce)
        if recorded is None:
            if start is None:
                raise MissingMetadataError(
                    f"pending offset {offset.nonce} has no resolution in {offset.metadata_path}; was "
                    "kinesis.metadataPath changed or deleted?"
                )
            resolved = self._next_offset(self._resolve(parse_offset(start)))
            recorded = store.put_document(offset.nonce, _as_dict(resolved))  # first resolution wins
        return parse_offset(recorded)  # type: ignore[return-value]

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """One partition per ``kinesis.shardsPerPartition`` shards still open in batch ``end``."""
        if start == end:
            return []
        offset = self._resolve(parse_offset(end), start)
        self._last = offset
        tasks = []
        for key, position in offset.active().items():
            stream, shard_id = split_shard_key(key)
            low, high = self._catalog.hash_range(stream, shard_id)
            tasks.append(ShardTask(stream, shard_id, low, high, position))
        size = self.settings.shards_per_partition
        return [
            KinesisPartition(offset.batch_id, offset.source_id, offset.metadata_path, tuple(tasks[i : i + size]))
            for i in range(0, len(tasks), size)
        ]

    def commit(self, end: dict) -> None:
        """Spark finished the batch ending at ``end``: purge batches older than ``kinesis.minBatchesToRetain``."""
        offset = self._resolve(parse_offset(end))
        if self._last is None or offset.batch_id > self._last.batch_id:
            self._last = offset
        keep_from = offset.batch_id - self.settings.min_batches_to_retain + 1
        if keep_from > 0:
            make_store(self.settings, offset.metadata_path).purge(offset.source_id, keep_from)

    # --- executors: reading -----------------------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read each shard of the partition, replaying the recorded range when this batch ran before."""
        assert isinstance(partition, KinesisPartition)
        store = make_store(self.settings, partition.metadata_path)
        client = kinesis_client(self.settings.client)
        for task in partition.tasks:
            recorded = store.get_shard_read(partition.source_id, partition.batch_id, task.stream, task.shard_id)
            fetcher = ShardFetcher(
                client, task, self._limits(), self.settings.client.retry, shard_context(self.settings, task), recorded
            )
            yield from fetcher.batches()
            assert fetcher.result is not None
            if recorded is None:
                store.record_shard_read(partition.source_id, partition.batch_id, fetcher.result)

    def _limits(self) -> FetchLimits:
        return FetchLimits(
            max_records=self.settings.max_fetch_records,
            max_time_s=self.settings.max_fetch_time_s,
            records_per_call=self.settings.records_per_fetch,
            fetch_interval_s=self.settings.fetch_interval_s,
        )

    def stop(self) -> None:
        """Nothing to release: clients are per process, and Spark rarely calls this (NOTES.md)."""
