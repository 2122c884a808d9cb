"""The metadata store: per (source, batch, shard), where that batch's read of the shard stopped.

Who calls it: executors (``stream_reader.KinesisStreamReader.read``) look up a batch's record before reading a
shard, so that a batch that runs again stops at exactly the same record, and write it when they finish (first
write wins); the driver reads the previous batch's records to plan the next batch, keeps pyspark 4.0.2's
pending-offset resolutions here, and purges batches older than ``kinesis.minBatchesToRetain``.

Layout (fixed; the DynamoDB store, ``metadata/dynamodb.py``, uses the same keys): partition key ``sourceId``; sort key
``batchShard`` = ``<batch id, 20 digits>/<streamName>/<shardId>``; ``expiresAt`` (epoch seconds, TTL). Path
stores keep one JSON file per key: ``<metadataPath>/<sourceId>/<batch 20 digits>/<streamName>/<shardId>.json``.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from ..positions import AFTER_SEQUENCE_NUMBER, SHARD_END, WHOLE_RECORD, Position

BATCH_DIGITS = 20
PENDING = "pending"


# Why a batch's read of a shard stopped (``ShardRead.stop``); the driver plans the next batch from it.
STOP_LIMIT = "limit"  # maxFetchRecordsPerShard / maxRecordsPerTrigger reached: more records are waiting
STOP_TIME = "time"  # maxFetchTimePerShardSec spent: more records are probably waiting
STOP_BOUND = "bound"  # the next record arrived after the batch's planning time (or AvailableNow's start)
STOP_CAUGHT_UP = "caughtUp"  # an empty answer at the tip
STOP_SHARD_END = "shardEnd"  # a closed shard read to its end (or a shard that vanished)
STOP_END = "end"  # a fixed end reached: a replay's recorded last record, a batch read's ending position
# Stops after which the shard has records waiting, so the next plan reads it without probing first (a bound stop
# saw the next record; AvailableNow's own bound probes anyway: see planner._find_waiting).
MORE_WAITING = frozenset({STOP_LIMIT, STOP_TIME, STOP_BOUND})


@dataclass(frozen=True)
class DataLossEvent:
    """Records a read found gone at ``position`` (``kind``: "position gone" or "shard gone"), with
    ``kinesis.failOnDataLoss=false``: the read went on from the oldest record, or not at all."""

    position: Position
    kind: str

    def to_json(self) -> dict[str, Any]:
        return {"position": self.position.to_json(), "kind": self.kind}

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> DataLossEvent:
        return cls(Position.from_json(body["position"]), str(body["kind"]))


class MetadataConflictError(RuntimeError):
    """Another attempt of the same batch recorded a different end for a shard: this attempt must not be kept."""


@dataclass(frozen=True)
class ShardRead:
    """Where one batch's read of one shard started and stopped.

    ``last_*`` name the last user record returned (None when the batch returned nothing from the shard);
    ``last_complete`` says it was the final user record of its Kinesis record, so the next batch may start after
    the whole record; ``shard_end`` says the shard is closed and was read to its end; ``stop`` says why the
    read stopped (``STOP_*``). Optional (absent in older records): ``dropped_out_of_range`` counts KPL
    sub-records dropped because their hash key is outside the shard's range, ``data_loss`` says the read found
    its start gone (``kinesis.failOnDataLoss=false``); the driver logs and reports both. ``next_iterator`` is
    a GetRecords shard iterator pointing exactly at ``next_start()`` (the read consumed its last page whole),
    received at ``iterator_ms`` (wall clock): the next read or probe of the shard starts with it instead of
    GetShardIterator while it is fresh. It is a hint, not part of the range: two attempts may hold different ones.
    """

    stream: str
    shard_id: str
    start: Position
    records: int
    last_sequence_number: str | None = None
    last_sub_sequence_number: int = WHOLE_RECORD
    last_complete: bool = True
    shard_end: bool = False
    millis_behind_latest: int | None = None
    stop: str | None = None
    dropped_out_of_range: int = 0
    data_loss: DataLossEvent | None = None
    next_iterator: str | None = None
    iterator_ms: int | None = None

    def same_range(self, other: ShardRead) -> bool:
        """Both name the same records: same start, count and end (bookkeeping such as lag or why the read
        stopped may differ between two attempts that read the same records)."""
        return (self.start, self.records, self.next_start()) == (other.start, other.records, other.next_start())

    def next_start(self) -> Position:
        """Where the next batch starts reading this shard."""
        if self.shard_end:
            return Position(SHARD_END)
        if self.last_sequence_number is None:
            return self.start
        sub = WHOLE_RECORD if self.last_complete else self.last_sub_sequence_number
        return Position(AFTER_SEQUENCE_NUMBER, self.last_sequence_number, sub)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "stream": self.stream,
            "shardId": self.shard_id,
            "start": self.start.to_json(),
            "records": self.records,
            "lastSequenceNumber": self.last_sequence_number,
            "lastSubSequenceNumber": self.last_sub_sequence_number,
            "lastComplete": self.last_complete,
            "shardEnd": self.shard_end,
            "millisBehindLatest": self.millis_behind_latest,
            "stop": self.stop,
        }
        if self.dropped_out_of_range:
            body["droppedOutOfRange"] = self.dropped_out_of_range
        if self.data_loss is not None:
            body["dataLoss"] = self.data_loss.to_json()
        if self.next_iterator is not None:
            body["nextShardIterator"] = self.next_iterator
            body["iteratorMs"] = self.iterator_ms
        return body

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> ShardRead:
        return cls(
            stream=body["stream"],
            shard_id=body["shardId"],
            start=Position.from_json(body["start"]),
            records=int(body["records"]),
            last_sequence_number=body.get("lastSequenceNumber"),
            last_sub_sequence_number=int(body.get("lastSubSequenceNumber", WHOLE_RECORD)),
            last_complete=bool(body.get("lastComplete", True)),
            shard_end=bool(body.get("shardEnd", False)),
            millis_behind_latest=body.get("millisBehindLatest"),
            stop=body.get("stop"),
            dropped_out_of_range=int(body.get("droppedOutOfRange", 0)),
            data_loss=DataLossEvent.from_json(body["dataLoss"]) if body.get("dataLoss") else None,
            next_iterator=body.get("nextShardIterator"),
            iterator_ms=body.get("iteratorMs"),
        )


def batch_shard_key(batch_id: int, stream: str, shard_id: str) -> str:
    """The sort key of one batch's record for one shard."""
    return f"{batch_id:0{BATCH_DIGITS}d}/{stream}/{shard_id}"


_SAFE_ID = re.compile(r"^[A-Za-z0-9_.\-]+$")


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
    def purge(self, source_id: str, below_batch: int) -> int:
        """Delete the records of batches < ``below_batch``; returns how many batches were deleted."""

    def record_shard_read(self, source_id: str, batch_id: int, read: ShardRead) -> None:
        """``put_shard_read``, failing the caller when another attempt recorded a different range (positions and
        record count; not lag or stop reason, which two attempts reading the same records may see differently)."""
        stored = self.put_shard_read(source_id, batch_id, read)
        if not stored.same_range(read):
            raise MetadataConflictError(
                f"batch {batch_id} of stream '{read.stream}' shard {read.shard_id} was already recorded by another "
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
    def _delete_tree(self, relative: str) -> None: ...

    # -- the store --
    def _shard_path(self, source_id: str, batch_id: int, stream: str, shard_id: str) -> str:
        check_id("source id", source_id)
        check_id("stream name", stream)
        check_id("shard id", shard_id)
        return f"{source_id}/{batch_shard_key(batch_id, stream, shard_id)}.json"

    def _put(self, relative: str, body: dict[str, Any]) -> dict[str, Any]:
        if self._create(relative, json.dumps(body, sort_keys=True).encode()):
            return body
        stored = self._read(relative)
        if stored is None:  # deleted between our attempt and our read: only a purge does that
            raise RuntimeError(f"metadata file {self.root}/{relative} vanished while being written")
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

    def purge(self, source_id: str, below_batch: int) -> int:
        check_id("source id", source_id)
        old = [name for name in self._list_dirs(source_id) if name.isdigit() and int(name) < below_batch]
        for name in old:
            self._delete_tree(f"{source_id}/{name}")
        return len(old)


def open_store(
    path: str,
    client_settings: Any = None,
    s3_endpoint_url: str | None = None,
    *,
    dynamodb_endpoint_url: str | None = None,
    retry: Any = None,
) -> MetadataStore:
    """The store an offset's ``metadataPath`` names: ``dynamodb://<table>?region=<region>`` (DynamoDB, endpoint
    from ``kinesis.dynamodb.endpointUrl``), ``s3://`` through boto3, a local path or ``file://``, else any
    filesystem pyarrow knows (``hdfs://``, ``viewfs://``). ``client_settings`` are the application's own
    credentials; ``retry`` (a ``RetryPolicy``) governs the AWS stores' calls. Cheap: no I/O until used."""
    if path.startswith("dynamodb://"):
        from .dynamodb import DynamoDBStore

        return DynamoDBStore.from_uri(path, client_settings, dynamodb_endpoint_url, retry)
    if path.startswith(("s3://", "s3a://", "s3n://")):
        from .s3 import S3Store

        return S3Store(path, client_settings, s3_endpoint_url, retry)
    from .filesystem import ArrowFileSystemStore, LocalStore

    if "://" not in path or path.startswith("file://"):
        return LocalStore(path.removeprefix("file://"))
    return ArrowFileSystemStore(path)
