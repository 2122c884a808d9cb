"""Positions in a shard, the ``startingPosition`` / ``endingPosition`` grammars, and shard keys and labels.

Who calls it: nearly every module: the source's driver half (offsets, plans, options), ``fetch`` on executors, the
metadata stores (where a read started and stopped), ``options`` to validate the two position options. A
``Position`` says where reading a shard starts (TRIM_HORIZON, AT_TIMESTAMP, AT/AFTER a user record, inside a KPL
aggregate too, or SHARD_END); ``parse_starting_position`` and ``parse_ending_position`` read the options (one
position, or a JSON map keyed ``shardId`` or ``stream/shardId``, looked up with ``shard_entry``); ``shard_key`` names
a shard in offsets and maps, ``shard_label`` in messages. It imports nothing of the connector.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

T = TypeVar("T")
D = TypeVar("D")

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
        # The allowed forms are said once, by the caller (the option's error): here only a "did you mean".
        close = difflib.get_close_matches(upper, (LATEST, TRIM_HORIZON, "EARLIEST", AT_TIMESTAMP), n=1, cutoff=0.6)
        raise ValueError(f"{text!r} is not a position" + (f"; did you mean {close[0]}?" if close else ""))
    return Position(kind)


# --- shard keys and labels -------------------------------------------------------------------------------------


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


def shard_entry(per_shard: Mapping[str, T], stream: str, shard_id: str, default: D) -> T | D:
    """A shard's entry in a per-shard option map: under ``stream/shardId``, else ``shardId``, else ``default``."""
    return per_shard.get(shard_key(stream, shard_id), per_shard.get(shard_id, default))


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
        return shard_entry(self.per_shard, stream, shard_id, self.default)


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


@dataclass(frozen=True)
class ShardEnd:
    """An inclusive end: stop after user record (sequence_number, sub_sequence_number)."""

    sequence_number: str
    sub_sequence_number: int


def parse_ending_position(text: str) -> dict[str, ShardEnd] | None:
    """None for ``LATEST``; else the JSON map of shard key (``shardId`` or ``stream/shardId``) to inclusive end.
    Raises ValueError saying what is wrong."""
    if text.strip().upper() == LATEST:
        return None
    try:
        raw = json.loads(text)
        ends = {}
        for key, value in raw.items():
            position = Position.from_json(value)
            if position.kind not in (AT_SEQUENCE_NUMBER, AFTER_SEQUENCE_NUMBER):
                raise ValueError(f"shard {key!r}: an end must name a sequence number")
            assert position.sequence_number is not None
            ends[key] = ShardEnd(str(int(position.sequence_number)), max(position.sub_sequence_number, 0))
        return ends
    except (AttributeError, TypeError) as exc:  # not a JSON object, or an entry of the wrong type
        raise ValueError(str(exc)) from None
