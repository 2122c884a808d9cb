"""The metadata store's interface: per (source, batch, shard), where that batch's read of the shard stopped.

Who calls it: executors (``source.stream_reader.KinesisStreamReader.read``) look up a batch's record before reading
a shard, so that a batch that runs again stops at exactly the same record, and write it when they finish (first
write wins); the driver reads the previous batch's records to plan the next batch, keeps pyspark 4.0.2's
pending-offset documents and the source document here, and purges batches older than ``kinesis.minBatchesToRetain``.
The sink keeps its notes of partitions written whole here (``sink.replay``, ``kinesis.sink.skipReplayedPartitions``).
``PathStore`` is a store over a tree of small JSON files. The layout is fixed (stores written by earlier versions
are read back): docs/source.md, "Offsets, the metadata store and exact replay"."""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from typing import Any

from ..errors import KinesisConnectorError
from ..fetch.reads import ShardRead
from ..positions import shard_label
from ..stream_ids import storage_key

BATCH_DIGITS = 20
PENDING = "pending"
MARKER_PREFIX = "document-"  # a path store's marker file in a batch directory (stream directories are directories)
NOTE_PREFIX = "note-"  # a path store's batch note in a batch directory


class MetadataConflictError(KinesisConnectorError, RuntimeError):
    """Another attempt of the same batch recorded a different end for a shard, or a purge deleted what this attempt
    was recording: this attempt must not be kept."""


def batch_shard_key(batch_id: int, stream: str, shard_id: str) -> str:
    """The sort key of one batch's record for one shard (a stream given by ARN: ``stream_ids.storage_key``)."""
    return f"{batch_id:0{BATCH_DIGITS}d}/{check_id('stream', storage_key(stream))}/{shard_id}"


_SAFE_ID = re.compile(r"^[A-Za-z0-9_.\-@]+$")  # @: a stream given by ARN (stream_ids.storage_key)


def check_id(kind: str, value: str) -> str:
    """Source ids, stream names and shard ids become path parts: refuse anything that could escape them."""
    if not _SAFE_ID.match(value) or value in (".", ".."):
        raise ValueError(f"{kind} {value!r} cannot be used in a metadata key")
    return value


class MetadataStore(ABC):
    """Per-batch shard records plus small driver documents; all writes are first-write-wins."""

    @abstractmethod
    def put_shard_read(self, source_id: str, batch_id: int, read: ShardRead) -> ShardRead:
        """Record ``read`` unless a record exists; returns the stored record (ours or the earlier one)."""

    @abstractmethod
    def get_shard_read(self, source_id: str, batch_id: int, stream: str, shard_id: str) -> ShardRead | None:
        """The record of ``batch_id`` for one shard, or None."""

    def get_shard_reads(
        self, source_id: str, batch_id: int, shards: list[tuple[str, str]]
    ) -> dict[tuple[str, str], ShardRead | None]:
        """The records of ``batch_id`` for many (stream, shard id) pairs at once (the planner's per-batch lookup).

        The default asks per shard on the driver's thread pool; stores with a batch read (DynamoDB) override it.
        """
        from ..parallel import parallel_map

        found = parallel_map(lambda shard: self.get_shard_read(source_id, batch_id, *shard), shards)
        return dict(zip(shards, found, strict=True))

    @abstractmethod
    def put_document(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """Store a driver document (e.g. a pending offset's resolution) unless present; returns the stored one."""

    @abstractmethod
    def get_document(self, name: str) -> dict[str, Any] | None:
        """A driver document, or None."""

    @abstractmethod
    def put_batch_document(self, source_id: str, batch_id: int, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """``put_document``, and ``purge`` deletes the document with batch ``batch_id`` of ``source_id`` (the
        driver's pending-offset resolutions; the marker is written first, so a crash between the two writes leaves
        a marker without a document, never a document nobody purges)."""

    @abstractmethod
    def put_batch_note(self, source_id: str, batch_id: int, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """Keep a small note with batch ``batch_id`` of ``source_id`` unless one of that name is there (first write
        wins); returns the stored one. ``purge`` deletes it with its batch."""

    @abstractmethod
    def get_batch_note(self, source_id: str, batch_id: int, name: str) -> dict[str, Any] | None:
        """A batch note, or None."""

    @abstractmethod
    def purge(self, source_id: str, below_batch: int) -> int:
        """Delete the records of batches < ``below_batch``; returns how many batches were deleted."""

    def record_shard_read(self, source_id: str, batch_id: int, read: ShardRead) -> None:
        """``put_shard_read``, failing the caller when another attempt recorded a different range (positions and
        record count; not lag or stop reason, which two attempts reading the same records may see differently)."""
        stored = self.put_shard_read(source_id, batch_id, read)
        if not stored.same_range(read):
            raise MetadataConflictError(
                f"batch {batch_id} of {shard_label(read.stream, read.shard_id)} was already recorded by another "
                f"attempt ending at {stored.next_start().to_json()}, this attempt ended at "
                f"{read.next_start().to_json()}; this attempt fails so that its retry replays the recorded range"
            )


class PathStore(MetadataStore):
    """A store over a tree of small JSON files; subclasses provide the file operations."""

    def __init__(self, root: str):
        self.root = root.rstrip("/")

    # -- file operations (relative paths use "/") --
    @abstractmethod
    def _read(self, relative: str) -> bytes | None: ...

    @abstractmethod
    def _create(self, relative: str, body: bytes) -> bool:
        """Write ``body`` unless the file exists (atomically); True if this call created it."""

    @abstractmethod
    def _list_dirs(self, relative: str) -> list[str]:
        """Names of the direct children (directories / prefixes) of ``relative``."""

    @abstractmethod
    def _list_files(self, relative: str) -> list[str]:
        """Names of the files directly in ``relative`` (not of its subdirectories)."""

    @abstractmethod
    def _delete_file(self, relative: str) -> None:
        """Delete one file; no error when it is not there."""

    @abstractmethod
    def _delete_tree(self, relative: str) -> None: ...

    # -- the store --
    def _shard_path(self, source_id: str, batch_id: int, stream: str, shard_id: str) -> str:
        check_id("source id", source_id)
        check_id("shard id", shard_id)
        return f"{source_id}/{batch_shard_key(batch_id, stream, shard_id)}.json"

    def _put(self, relative: str, body: dict[str, Any]) -> dict[str, Any]:
        if self._create(relative, json.dumps(body, sort_keys=True).encode()):
            return body
        stored = self._read(relative)
        if stored is None:  # deleted between our attempt and our read: only a purge does that
            raise MetadataConflictError(f"metadata file {self.root}/{relative} vanished while being written")
        return json.loads(stored)

    def put_shard_read(self, source_id: str, batch_id: int, read: ShardRead) -> ShardRead:
        stored = self._put(self._shard_path(source_id, batch_id, read.stream, read.shard_id), read.to_json())
        return ShardRead.from_json(stored)

    def get_shard_read(self, source_id: str, batch_id: int, stream: str, shard_id: str) -> ShardRead | None:
        body = self._read(self._shard_path(source_id, batch_id, stream, shard_id))
        return ShardRead.from_json(json.loads(body)) if body is not None else None

    def put_document(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._put(f"{PENDING}/{check_id('document', name)}.json", body)

    def get_document(self, name: str) -> dict[str, Any] | None:
        body = self._read(f"{PENDING}/{check_id('document', name)}.json")
        return json.loads(body) if body is not None else None

    def put_batch_document(self, source_id: str, batch_id: int, name: str, body: dict[str, Any]) -> dict[str, Any]:
        check_id("source id", source_id)
        marker = f"{source_id}/{batch_id:0{BATCH_DIGITS}d}/{MARKER_PREFIX}{check_id('document', name)}"
        self._create(marker, b"")  # False when an earlier attempt left it: the same marker
        return self.put_document(name, body)

    def _note_path(self, source_id: str, batch_id: int, name: str) -> str:
        check_id("source id", source_id)
        return f"{source_id}/{batch_id:0{BATCH_DIGITS}d}/{NOTE_PREFIX}{check_id('note', name)}.json"

    def put_batch_note(self, source_id: str, batch_id: int, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._put(self._note_path(source_id, batch_id, name), body)

    def get_batch_note(self, source_id: str, batch_id: int, name: str) -> dict[str, Any] | None:
        body = self._read(self._note_path(source_id, batch_id, name))
        return json.loads(body) if body is not None else None

    def purge(self, source_id: str, below_batch: int) -> int:
        """Delete each old batch's marked documents, then its directory (a purge cut short is finished by the next
        one: the directory, and so its markers, stay until their documents are gone)."""
        check_id("source id", source_id)
        old = [name for name in self._list_dirs(source_id) if name.isdigit() and int(name) < below_batch]
        for name in old:
            for marker in self._list_files(f"{source_id}/{name}"):
                if marker.startswith(MARKER_PREFIX):
                    self._delete_file(f"{PENDING}/{marker.removeprefix(MARKER_PREFIX)}.json")
            self._delete_tree(f"{source_id}/{name}")
        return len(old)
