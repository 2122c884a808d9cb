"""The source's offsets and their JSON form: what Spark checkpoints for every micro-batch.

Who calls it: the source's driver half (``planner``, ``query_offsets``; offsets never reach executors). A
``KinesisOffset`` for batch ``k`` holds the position each shard starts at in batch ``k``; where the batch stopped is
in the metadata store. Its JSON form is compact (format 2, ``to_dict``); ``parse_offset`` also reads format 1, which
older checkpoints hold. A ``PendingOffset`` is pyspark 4.0.2's answer while the reader does not yet know where the
query is. The model and the format: docs/source.md, "Offsets, the metadata store and exact replay".
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import KinesisConnectorError
from ..positions import (
    AFTER_SEQUENCE_NUMBER,
    AT_SEQUENCE_NUMBER,
    AT_TIMESTAMP,
    LATEST,
    SHARD_END,
    TRIM_HORIZON,
    WHOLE_RECORD,
    Position,
    shard_key,
    split_shard_key,
)

INITIAL_BATCH = -1  # the initial offset's batch id: no batch reads it, batch 0 starts at its positions
OFFSET_VERSION = 2  # the compact format below; parse_offset still reads format 1 (see docs/source.md)
V1 = 1  # the format before 2: every position a JSON object under its full shard key; pending offsets keep it


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
      start of an AvailableNow run); None when the batch reads a steady shard without a probe: each read then takes
      what had arrived by its first call (``FetchLimits.stop_at_first_call``).
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

    def to_dict(self) -> dict[str, Any]:
        """The offset as the JSON object Spark checkpoints (format 2, see ``_stream_entry``)."""
        body: dict[str, Any] = {
            "v": OFFSET_VERSION,
            "sourceId": self.source_id,
            "metadataPath": self.metadata_path,
            "batchId": self.batch_id,
        }
        if self.until_ms is not None:
            body["untilMs"] = self.until_ms
        if self.source_document:
            body["sourceDocument"] = True
        if self.pinned is not None:
            body["pinned"] = dict(sorted(self.pinned.items()))
        named = [*self.shards, *self.parents, *(self.reads or ()), *self.max_records]
        named += [parent for parents in self.parents.values() for parent in parents]
        by_stream = _by_stream(named)
        body["streams"] = {stream: self._stream_entry(stream, keys) for stream, keys in by_stream.items()}
        return body

    def to_json(self) -> str:
        """``to_dict`` as text: equal offsets give equal text (every map and list in a fixed order)."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    def _stream_entry(self, stream: str, keys: list[str]) -> dict[str, Any]:
        """One stream's part of format 2: shards named by ``short_shard_id`` and grouped by position type.

        ``{"after": {"7": "<sequence number>[:<sub-sequence number>]"}, "at": {…}, "atTimestamp": {"8": ms},
        "trimHorizon": ["9"], "latest": […], "shardEnd": ["3"], "parents": {"7": ["3"]}, "reads": ["7"]}``;
        ``reads`` becomes ``{"7": cap}`` when every shard read has a cap (``maxRecords`` otherwise); sections
        without shards are left out, ``reads`` is there whenever the offset names the shards it reads.
        """
        short = {key: short_shard_id(split_shard_key(key)[1]) for key in keys}
        sections: dict[str, list[str]] = {kind: [] for kind in _SECTIONS}
        for key in keys:
            if key in self.shards:
                sections[self.shards[key].kind].append(key)
        entry: dict[str, Any] = {}
        for kind, ids in sections.items():
            if ids and kind in _VALUED:
                entry[_SECTIONS[kind]] = {short[key]: _position_value(self.shards[key]) for key in ids}
            elif ids:
                entry[_SECTIONS[kind]] = [short[key] for key in ids]
        parents = {short[key]: self.parents[key] for key in keys if self.parents.get(key)}
        if parents:  # a parent in another stream keeps its key
            entry["parents"] = {child: [short.get(p, p) for p in ps] for child, ps in parents.items()}
        reads = [short[key] for key in keys if self.reads is not None and key in self.reads]
        caps = {short[key]: self.max_records[key] for key in keys if key in self.max_records}
        if self.reads is not None and caps and list(caps) == reads:
            entry["reads"] = caps
            return entry
        if self.reads is not None:
            entry["reads"] = reads
        if caps:
            entry["maxRecords"] = caps
        return entry

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
    """A placeholder offset: "the batch after the start offset", resolved in ``partitions`` (see module doc).
    Small, so it keeps format 1."""

    nonce: str
    metadata_path: str

    def to_dict(self) -> dict[str, Any]:
        return {"metadataPath": self.metadata_path, "pending": self.nonce, "v": V1}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))


class OffsetFormatError(KinesisConnectorError, ValueError):
    """A checkpoint's offset that this version cannot read: another source's, or a newer format."""


def parse_offset(value: str | Mapping[str, Any]) -> KinesisOffset | PendingOffset:
    """An offset from its JSON text (Spark passes JSON strings) or an already decoded dict, in either format."""
    body = json.loads(value) if isinstance(value, str) else dict(value)
    version = body.get("v")
    if version not in (V1, OFFSET_VERSION):
        expected = f"expected {V1} or {OFFSET_VERSION}"
        raise OffsetFormatError(f"offset version {version!r} is not supported ({expected}): {body}")
    try:
        if "pending" in body:
            return PendingOffset(body["pending"], body["metadataPath"])
        return _parse_v1(body) if version == V1 else _parse_v2(body)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise OffsetFormatError(f"not an aws-kinesis offset of format {version} ({exc!r}): {str(body)[:500]}") from None


def _parse_v1(body: dict[str, Any]) -> KinesisOffset:
    """Format 1 (checkpoints written before format 2): full shard keys, every position a JSON object."""
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
        pinned=_pinned(body),
    )


def _parse_v2(body: dict[str, Any]) -> KinesisOffset:
    """Format 2 (``KinesisOffset.to_dict``)."""
    shards: dict[str, Position] = {}
    parents: dict[str, tuple[str, ...]] = {}
    reads: set[str] | None = None
    caps: dict[str, int] = {}
    for stream, entry in body["streams"].items():
        for kind, section in _SECTIONS.items():
            for short, value in _items(entry.get(section, ())):
                shards[_full(short, stream)] = _position(kind, value)
        for short, ps in entry.get("parents", {}).items():
            parents[_full(short, stream)] = tuple(_full(parent, stream) for parent in ps)
        if "reads" in entry:
            reads = reads or set()
            for short, cap in _items(entry["reads"]):
                reads.add(_full(short, stream))
                if cap is not None:
                    caps[_full(short, stream)] = int(cap)
        caps.update({_full(short, stream): int(cap) for short, cap in entry.get("maxRecords", {}).items()})
    return KinesisOffset(
        str(body["sourceId"]),
        str(body["metadataPath"]),
        int(body["batchId"]),
        shards,
        parents,
        frozenset(reads) if reads is not None else None,
        caps,
        int(body["untilMs"]) if "untilMs" in body else None,
        bool(body.get("sourceDocument", False)),
        _pinned(body),
    )


def _pinned(body: Mapping[str, Any]) -> dict[str, str] | None:
    return {str(key): str(value) for key, value in body["pinned"].items()} if "pinned" in body else None


# --- format 2's pieces ----------------------------------------------------------------------------------------

# A stream's sections, one per position type, in the order written; the first three map shards to a value, the
# others list shards.
_SECTIONS = {
    AFTER_SEQUENCE_NUMBER: "after",
    AT_SEQUENCE_NUMBER: "at",
    AT_TIMESTAMP: "atTimestamp",
    TRIM_HORIZON: "trimHorizon",
    LATEST: "latest",
    SHARD_END: "shardEnd",
}
_VALUED = (AFTER_SEQUENCE_NUMBER, AT_SEQUENCE_NUMBER, AT_TIMESTAMP)
_CANONICAL_ID = re.compile(r"shardId-([0-9]{12})")  # every shard id Kinesis makes
_RAW_MARK = "="  # before a shard id that is not canonical but looks short (no Kinesis shard id contains "=")


def _by_stream(keys: Iterable[str]) -> dict[str, list[str]]:
    """Shard keys grouped by stream: streams sorted by name, each stream's keys sorted by shard id."""
    grouped: dict[str, set[str]] = {}
    for key in keys:
        grouped.setdefault(split_shard_key(key)[0], set()).add(key)
    return {stream: sorted(grouped[stream], key=lambda key: split_shard_key(key)[1]) for stream in sorted(grouped)}


def short_shard_id(shard_id: str) -> str:
    """How format 2 names a shard: ``shardId-000000000042`` as ``42``; any other id as it is (``=`` first if it
    is all digits, so that it cannot be read back as a number)."""
    canonical = _CANONICAL_ID.fullmatch(shard_id)
    if canonical:
        return str(int(canonical.group(1)))
    ambiguous = (shard_id.isdigit() and shard_id.isascii()) or shard_id.startswith(_RAW_MARK)
    return _RAW_MARK + shard_id if ambiguous else shard_id


def _full(short: str, stream: str) -> str:
    """The shard key of a name in ``stream``'s entry (``short_shard_id`` reversed; a parent in another stream is
    named by its key)."""
    if short.isdigit() and short.isascii():
        return shard_key(stream, f"shardId-{int(short):012d}")
    if "/" in short:
        return short
    return shard_key(stream, short.removeprefix(_RAW_MARK))


def _position_value(position: Position) -> str | int:
    """A position's value in its section: ``<sequence number>``, with ``:<sub-sequence number>`` unless it is
    the whole record; or the arrival time in ms."""
    if position.kind == AT_TIMESTAMP:
        return position.timestamp_ms  # type: ignore[return-value]
    sub = position.sub_sequence_number
    return position.sequence_number if sub == WHOLE_RECORD else f"{position.sequence_number}:{sub}"  # type: ignore[return-value]


def _position(kind: str, value: Any) -> Position:
    """``_position_value`` reversed."""
    if kind == AT_TIMESTAMP:
        return Position(kind, timestamp_ms=int(value))
    if kind not in _VALUED:
        return Position(kind)
    sequence, _, sub = str(value).partition(":")
    return Position(kind, sequence, int(sub) if sub else WHOLE_RECORD)


def _items(section: Any) -> Iterable[tuple[str, Any]]:
    """A section's (short id, value) pairs; a listing section's values are None."""
    return section.items() if isinstance(section, Mapping) else ((short, None) for short in section)
