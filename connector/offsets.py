"""Positions in a shard, the source's offsets and their JSON form, and the ``startingPosition`` option's grammar.

Model (see docs/source.md, "Offsets and exact replay"):
- A ``Position`` says where reading a shard starts: TRIM_HORIZON, AT_TIMESTAMP, AT/AFTER a user record
  (sequence number + sub-sequence number, so reading can resume inside a KPL aggregate), or SHARD_END (done).
- ``KinesisOffset`` for batch ``k`` holds, for every shard, the position batch ``k`` starts reading at. Where a
  batch *stopped* is only known once executors have read; they record it in the metadata store
  (``connector.metadata``) under the offset's ``source_id`` and ``batch_id``, and the next offset is built from
  those records. A batch that runs again finds its records there and stops at exactly the same place.
- ``PendingOffset`` is what pyspark 4.0.2's argument-less ``latestOffset()`` returns while the reader does not
  yet know where the query is (first call after a start or restart); ``partitions(start, end)`` resolves it
  from ``start`` and records the resolution, so a replay resolves it identically.

Who calls it: ``stream_reader`` / ``batch_reader`` on the driver, ``fetch`` on executors, ``options`` to
validate ``kinesis.startingPosition``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

OFFSET_VERSION = 1

TRIM_HORIZON = "TRIM_HORIZON"
LATEST = "LATEST"
AT_TIMESTAMP = "AT_TIMESTAMP"
AT_SEQUENCE_NUMBER = "AT_SEQUENCE_NUMBER"
AFTER_SEQUENCE_NUMBER = "AFTER_SEQUENCE_NUMBER"
SHARD_END = "SHARD_END"
_KINDS = (TRIM_HORIZON, LATEST, AT_TIMESTAMP, AT_SEQUENCE_NUMBER, AFTER_SEQUENCE_NUMBER, SHARD_END)
_ALIASES = {"EARLIEST": TRIM_HORIZON}
WHOLE_RECORD = -1  # sub-sequence number meaning "the whole Kinesis record" (every user record in it)


@dataclass(frozen=True, order=True)
class Position:
    """Where to start reading one shard.

    ``AT_SEQUENCE_NUMBER``: at user record (sequence_number, sub_sequence_number).
    ``AFTER_SEQUENCE_NUMBER``: after user record (sequence_number, sub_sequence_number); with ``WHOLE_RECORD``,
    after every user record of that Kinesis record. ``AT_TIMESTAMP``: records that arrived at or after
    ``timestamp_ms``. ``LATEST`` exists only in options: the driver turns it into AT_TIMESTAMP(now).
    """

    kind: str
    sequence_number: str | None = None
    sub_sequence_number: int = WHOLE_RECORD
    timestamp_ms: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"unknown position type {self.kind!r}; allowed: {', '.join(_KINDS)}")
        if self.kind in (AT_SEQUENCE_NUMBER, AFTER_SEQUENCE_NUMBER) and not _is_sequence_number(self.sequence_number):
            raise ValueError(f"{self.kind} needs a decimal sequence number, got {self.sequence_number!r}")
        if self.kind == AT_TIMESTAMP and self.timestamp_ms is None:
            raise ValueError("AT_TIMESTAMP needs a timestamp")

    @property
    def is_shard_end(self) -> bool:
        return self.kind == SHARD_END

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.kind}
        if self.sequence_number is not None:
            out["sequenceNumber"] = self.sequence_number
            out["subSequenceNumber"] = self.sub_sequence_number
        if self.timestamp_ms is not None:
            out["timestampMs"] = self.timestamp_ms
        return out

    @classmethod
    def from_json(cls, value: Any) -> Position:
        """From our JSON form, the awslabs form (``iteratorType`` + ``iteratorPosition``) or a bare type name."""
        if isinstance(value, str):
            return parse_position_text(value)
        if not isinstance(value, Mapping):
            raise ValueError(f"a position must be a string or a JSON object, got {value!r}")
        kind = str(value.get("type", value.get("iteratorType", ""))).upper()
        kind = _ALIASES.get(kind, kind)
        sequence = value.get("sequenceNumber", value.get("iteratorPosition") if kind != AT_TIMESTAMP else None)
        timestamp = value.get("timestampMs")
        if kind == AT_TIMESTAMP and timestamp is None:
            timestamp = _timestamp_ms(str(value.get("timestamp", value.get("iteratorPosition", ""))))
        sub = value.get("subSequenceNumber")
        default_sub = 0 if kind == AT_SEQUENCE_NUMBER else WHOLE_RECORD
        return cls(
            kind,
            str(sequence) if sequence is not None else None,
            int(sub) if sub is not None else default_sub,
            int(timestamp) if timestamp is not None else None,
        )


def _is_sequence_number(value: str | None) -> bool:
    return bool(value) and value.isdigit()  # type: ignore[union-attr]


def _timestamp_ms(text: str) -> int:
    """Milliseconds since the epoch of an ISO-8601 time that carries its UTC offset (``Z`` or ``+hh:mm``)."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO-8601 time such as 2026-11-22T08:00:00+00:00") from None
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no UTC offset; write it like 2026-11-22T08:00:00Z or ...+01:00")
    return round(moment.timestamp() * 1000)


def parse_position_text(text: str) -> Position:
    """``TRIM_HORIZON``, ``EARLIEST``, ``LATEST`` or ``AT_TIMESTAMP:<ISO-8601 with offset>`` (also ``=`` or space)."""
    stripped = text.strip()
    upper = stripped.upper()
    if upper.startswith(AT_TIMESTAMP):
        rest = stripped[len(AT_TIMESTAMP) :].lstrip(" =:")
        if not rest:
            raise ValueError("AT_TIMESTAMP needs a time: AT_TIMESTAMP:2026-11-22T08:00:00Z")
        return Position(AT_TIMESTAMP, timestamp_ms=_timestamp_ms(rest))
    kind = _ALIASES.get(upper, upper)
    if kind not in (TRIM_HORIZON, LATEST):
        raise ValueError(
            f"{text!r} is not a position; allowed: LATEST, TRIM_HORIZON, EARLIEST, AT_TIMESTAMP:<ISO-8601 time>, "
            "or a JSON map of per-shard positions"
        )
    return Position(kind)


# --- the startingPosition / endingPosition options ------------------------------------------------------------

DEFAULT_KEY = "*"


@dataclass(frozen=True)
class PositionSpec:
    """A parsed ``kinesis.startingPosition``: one default position plus per-shard overrides.

    Per-shard keys are ``shardId`` (any stream) or ``streamName/shardId``.
    """

    default: Position
    per_shard: Mapping[str, Position] = field(default_factory=dict)

    def for_shard(self, stream: str, shard_id: str) -> Position:
        return self.per_shard.get(f"{stream}/{shard_id}", self.per_shard.get(shard_id, self.default))


def parse_starting_position(text: str, default_for_map: Position = Position(TRIM_HORIZON)) -> PositionSpec:
    """Parse the option: a position name, or a JSON object mapping shard keys (and optionally ``*``) to positions.

    In a JSON map, shards not listed start at ``*``'s position, else at ``default_for_map`` (TRIM_HORIZON: a shard
    nobody mentioned is read whole rather than skipped). A ``metadata`` key (awslabs' form) is ignored.
    """
    stripped = text.strip()
    if not stripped.startswith("{"):
        return PositionSpec(parse_position_text(stripped))
    try:
        raw = json.loads(stripped)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc}") from None
    per_shard: dict[str, Position] = {}
    default = default_for_map
    for key, value in raw.items():
        if key == "metadata":
            continue
        try:
            position = Position.from_json(value)
        except ValueError as exc:
            raise ValueError(f"shard {key!r}: {exc}") from None
        if position.kind == SHARD_END:
            raise ValueError(f"shard {key!r}: SHARD_END is not a starting position")
        if key == DEFAULT_KEY:
            default = position
        else:
            per_shard[key] = position
    return PositionSpec(default, per_shard)


# --- offsets --------------------------------------------------------------------------------------------------


def shard_key(stream: str, shard_id: str) -> str:
    """The key of a shard in offsets: ``stream/shardId`` (stream names cannot contain ``/``)."""
    return f"{stream}/{shard_id}"


def split_shard_key(key: str) -> tuple[str, str]:
    stream, _, shard_id = key.rpartition("/")
    return stream, shard_id


def shard_label(stream: str, shard_id: str) -> str:
    """How every message of the source names a shard."""
    return f"stream '{stream}' shard {shard_id}"


def key_label(key: str) -> str:
    """``shard_label`` of a shard key."""
    return shard_label(*split_shard_key(key))


@dataclass(frozen=True)
class KinesisOffset:
    """Batch ``batch_id``'s plan: where each shard starts, and which shards it reads.

    - ``shards``: every shard the query tracks (keys from ``shard_key``); SHARD_END marks shards read to their
      end, kept while ListShards still shows them so that they are never read again.
    - ``parents``: for a shard whose parents are tracked too, their keys. A shard is *readable* only once every
      tracked parent is at SHARD_END: children are read after their parents, so per-key order holds.
    - ``reads``: the readable shards this batch reads (those with records waiting); None means all of them.
    - ``max_records``: per-shard caps from ``kinesis.maxRecordsPerTrigger`` / Spark's ReadMaxRows.
    - ``until_ms``: records that arrived after this instant are left for later batches (planning time, or the
      start of an AvailableNow run).
    - ``source_document``: the driver wrote the source's document into the metadata store when the query started
      (queries started before it existed have none), so executors and planner expect to find it there.
    - ``pinned``: the options that decide which rows exist, as the query started with them (None in checkpoints
      older than this field); a restart with other values is refused.
    """

    source_id: str
    metadata_path: str
    batch_id: int
    shards: Mapping[str, Position]
    parents: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    reads: frozenset[str] | None = None
    max_records: Mapping[str, int] = field(default_factory=dict)
    until_ms: int | None = None
    source_document: bool = False
    pinned: Mapping[str, str] | None = None

    def to_json(self) -> str:
        body: dict[str, Any] = {
            "v": OFFSET_VERSION,
            "sourceId": self.source_id,
            "metadataPath": self.metadata_path,
            "batchId": self.batch_id,
            "shards": {key: self.shards[key].to_json() for key in sorted(self.shards)},
        }
        if self.parents:
            body["parents"] = {key: list(parents) for key, parents in self.parents.items()}
        if self.reads is not None:
            body["reads"] = sorted(self.reads)
        if self.max_records:
            body["maxRecords"] = dict(self.max_records)
        if self.until_ms is not None:
            body["untilMs"] = self.until_ms
        if self.source_document:
            body["sourceDocument"] = True
        if self.pinned is not None:
            body["pinned"] = dict(self.pinned)
        return json.dumps(body, separators=(",", ":"), sort_keys=True)

    def readable(self) -> list[str]:
        """Shards not finished whose tracked parents are all finished, sorted."""
        return sorted(key for key in self.shards if is_readable(key, self.shards, self.parents))

    def active(self) -> dict[str, Position]:
        """The shards this batch reads."""
        return {key: self.shards[key] for key in self.readable() if self.reads is None or key in self.reads}


def is_readable(key: str, shards: Mapping[str, Position], parents: Mapping[str, tuple[str, ...]]) -> bool:
    """Not finished, and every tracked parent finished (an untracked parent is long gone, or was never ours)."""
    if shards[key].is_shard_end:
        return False
    return all(parent not in shards or shards[parent].is_shard_end for parent in parents.get(key, ()))


@dataclass(frozen=True)
class PendingOffset:
    """A placeholder offset: "the batch after the start offset", resolved in ``partitions`` (see module doc)."""

    nonce: str
    metadata_path: str

    def to_json(self) -> str:
        body = {"v": OFFSET_VERSION, "pending": self.nonce, "metadataPath": self.metadata_path}
        return json.dumps(body, separators=(",", ":"), sort_keys=True)


def parse_offset(value: str | Mapping[str, Any]) -> KinesisOffset | PendingOffset:
    """An offset from its JSON text (Spark passes JSON strings) or an already decoded dict."""
    body = json.loads(value) if isinstance(value, str) else dict(value)
    version = body.get("v")
    if version != OFFSET_VERSION:
        raise ValueError(f"offset version {version!r} is not supported (expected {OFFSET_VERSION}): {body}")
    if "pending" in body:
        return PendingOffset(body["pending"], body["metadataPath"])
    shards = {key: Position.from_json(position) for key, position in body["shards"].items()}
    reads = body.get("reads")
    return KinesisOffset(
        body["sourceId"],
        body["metadataPath"],
        int(body["batchId"]),
        shards,
        parents={key: tuple(parents) for key, parents in body.get("parents", {}).items()},
        reads=frozenset(reads) if reads is not None else None,
        max_records={key: int(cap) for key, cap in body.get("maxRecords", {}).items()},
        until_ms=body.get("untilMs"),
        source_document=bool(body.get("sourceDocument", False)),
        pinned={str(key): str(value) for key, value in body["pinned"].items()} if "pinned" in body else None,
    )
