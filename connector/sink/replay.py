"""Skipping the partitions a replayed micro-batch already wrote whole (``kinesis.sink.skipReplayedPartitions``).

Who calls it: ``task.write_task``, through ``ReplayCheck``: before sending a partition's rows it asks whether an
earlier attempt of the batch wrote them whole, and notes the partition once all its rows are stored.
``writer.KinesisStreamWriter`` writes the document executors check the store by when the query starts
(``ReplayNotes.announce``), and purges older batches' notes as batches commit (``ReplayNotes.purge``). Spark names
each task's query, micro-batch and partition (``PartitionOfBatch``); a note also holds a digest of the partition's
rows, so a replay whose plan put other rows into the partition writes them. docs/sink.md, "Skipping replayed
partitions".
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import KinesisConnectorError
from ..metadata.location import StoreLocation
from .columns import SinkColumns, data_as_binary
from .commit import SinkCommitMessage, log, log_to_stderr_if_unconfigured

if TYPE_CHECKING:
    from ..aws.settings import ClientSettings
    from ..metadata.store import MetadataStore

# Spark's local properties of a micro-batch's tasks (StreamExecution.QUERY_ID_KEY, MicroBatchExecution.BATCH_ID_KEY):
# the query id is kept in the checkpoint, so it is the same after a restart.
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
SHARED_DOCUMENT = "sink-notes-shared"  # written by the driver, read by each executor once: is the store shared?
_seen_shared: set[str] = set()  # the store paths this process found shared


class ReplayNotesNotSharedError(KinesisConnectorError, RuntimeError):
    """An executor does not see the store the driver wrote to: notes would never be found nor purged."""


@dataclass(frozen=True)
class PartitionOfBatch:
    """One task's place in its query: the micro-batch and the partition it writes."""

    query_id: str
    batch_id: int
    partition_id: int

    @property
    def source_id(self) -> str:
        return sink_source_id(self.query_id)

    @property
    def note_name(self) -> str:
        return f"partition-{self.partition_id}"


def sink_source_id(query_id: str) -> str:
    """The store's namespace of one query's notes (never a source's: source ids hold no ``sink-`` prefix)."""
    return f"sink-{query_id}"


def partition_of_batch() -> PartitionOfBatch | None:
    """This task's query, batch and partition, or None outside a micro-batch's task."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        return None
    query_id, batch_id = context.getLocalProperty(QUERY_ID_PROPERTY), context.getLocalProperty(BATCH_ID_PROPERTY)
    if not query_id or not batch_id:
        return None
    return PartitionOfBatch(query_id, int(batch_id), context.partitionId())


def rows_digest(by_stream: list[tuple[str, pa.Table]], columns: SinkColumns) -> str:
    """A digest of what the partition sends: each target stream and the multiset of its rows (data, partition key,
    explicit hash key). The rows are sorted first: a task of this source reads its shards side by side, so the
    same rows come in another interleaving in each attempt; the same rows give the same digest however Arrow
    chunked them."""
    digest = hashlib.blake2b(digest_size=16)
    for stream, rows in by_stream:
        digest.update(f"{stream}\0{rows.num_rows}\0".encode())
        fields = {"data": data_as_binary(rows, columns), "key": rows[columns.partition_key]}
        if columns.explicit_hash_key:
            fields["hash_key"] = rows[columns.explicit_hash_key]
        table = pa.table(fields)
        table = table.take(pc.sort_indices(table, sort_keys=[(name, "ascending") for name in fields]))
        for name in fields:
            digest_column(digest, table[name])
    return digest.hexdigest()


def digest_column(digest: Any, column: pa.ChunkedArray | pa.Array) -> None:
    """Feed each value's length (-1 for null) and then all values' bytes to ``digest``."""
    values = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    values = pc.cast(values, pa.large_binary())
    lengths = pc.fill_null(pc.binary_length(values), -1)
    digest.update(memoryview(lengths.buffers()[1])[lengths.offset * 8 : (lengths.offset + len(lengths)) * 8])
    offsets, data = values.buffers()[1], values.buffers()[2]
    if data is None or not len(values):
        return
    first = int.from_bytes(memoryview(offsets)[values.offset * 8 : values.offset * 8 + 8], "little")
    end = (values.offset + len(values)) * 8
    last = int.from_bytes(memoryview(offsets)[end : end + 8], "little")
    digest.update(memoryview(data)[first:last])


@dataclass(frozen=True)
class ReplayNotes:
    """Where the notes live; pickled to each task with the sink's settings."""

    location: StoreLocation

    def store(self, client: ClientSettings) -> MetadataStore:
        return self.location.open(client)

    def announce(self, client: ClientSettings) -> None:
        """On the driver, when the query starts: the document each executor looks for (``check_shared``)."""
        self.store(client).put_document(SHARED_DOCUMENT, {"shared": True})

    def check_shared(self, store: MetadataStore) -> None:
        """Fail when this executor does not see the driver's document (asked once per process and store)."""
        if self.location.path in _seen_shared:
            return
        if store.get_document(SHARED_DOCUMENT) is None:
            raise ReplayNotesNotSharedError(
                f"this executor does not see the store of kinesis.sink.skipReplayedPartitions that the driver "
                f"wrote to ({self.location.path!r}): set kinesis.metadataPath to a store every executor reaches "
                "(s3://bucket/prefix, hdfs://namenode/path, a shared mount) or use "
                "kinesis.metadataCommitterType=DYNAMODB"
            )
        _seen_shared.add(self.location.path)

    def written_before(self, store: MetadataStore, partition: PartitionOfBatch, digest: str) -> bool | None:
        """True: an earlier attempt of this batch wrote this partition whole with these rows; False: it wrote other
        rows (the plan is not deterministic); None: no note."""
        note = store.get_batch_note(partition.source_id, partition.batch_id, partition.note_name)
        return None if note is None else note.get("digest") == digest

    def note_written(self, store: MetadataStore, partition: PartitionOfBatch, digest: str, rows: int) -> None:
        store.put_batch_note(
            partition.source_id, partition.batch_id, partition.note_name, {"digest": digest, "rows": rows}
        )

    def purge(self, client: ClientSettings, query_id: str, committed_batch: int) -> int:
        """Delete the notes of batches before ``committed_batch``: Spark has logged them as committed, so it never
        runs them again (``committed_batch`` itself may run again if the driver dies before logging it)."""
        return self.store(client).purge(sink_source_id(query_id), committed_batch)


class ReplayCheck:
    """``kinesis.sink.skipReplayedPartitions`` in one task (``task.write_task``): skip a partition written whole
    before, note one written now."""

    def __init__(
        self,
        notes: ReplayNotes,
        client: ClientSettings,
        partition: PartitionOfBatch,
        digest: str,
        message: SinkCommitMessage,
    ):
        self.notes, self.partition, self.digest, self.message = notes, partition, digest, message
        self.store = notes.store(client)
        notes.check_shared(self.store)

    @classmethod
    def of(
        cls,
        notes: ReplayNotes | None,
        client: ClientSettings,
        by_stream: list[tuple[str, pa.Table]],
        columns: SinkColumns,
        message: SinkCommitMessage,
    ) -> ReplayCheck | None:
        """The check of this task, or None when the sink keeps no notes (``notes`` None) or runs outside a
        micro-batch."""
        if notes is None:
            return None
        partition = partition_of_batch()
        if partition is None:
            return None
        message.query_id = partition.query_id
        return cls(notes, client, partition, rows_digest(by_stream, columns), message)

    def skip(self, rows: int) -> bool:
        """True when an earlier attempt of this batch wrote this partition whole with these rows."""
        before = self.notes.written_before(self.store, self.partition, self.digest)
        if before:
            self.message.skipped_records, self.message.skipped_partitions = rows, 1
            return True
        if before is False:
            self.message.rewritten_partitions = 1
            log_to_stderr_if_unconfigured()
            log.warning(
                "aws-kinesis sink: partition %d of batch %d was written whole by an earlier attempt, with other rows "
                "than now (the query's plan is not deterministic): writing this attempt's rows too",
                self.partition.partition_id,
                self.partition.batch_id,
            )
        return False

    def note_written(self, rows: int) -> None:
        self.notes.note_written(self.store, self.partition, self.digest, rows)
