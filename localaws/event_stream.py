"""AWS event-stream messages, as SubscribeToShard answers carry them: split a relayed answer into messages, read
the records of an event, write a message, turn an event into a closed shard's last one."""

from __future__ import annotations

import http.client
import json
import struct
import zlib
from collections.abc import Iterator

from botocore.eventstream import EventStreamBuffer

from localaws.quota_model import record_bytes


def event_messages(response: http.client.HTTPResponse) -> Iterator[bytes]:
    """The event-stream messages of a SubscribeToShard answer, whole, as they arrive (until the server ends it)."""
    pending = b""
    while chunk := response.read1(65536):
        pending += chunk
        # An event-stream message starts with its total length (4 bytes, big-endian).
        while len(pending) >= 4 and len(pending) >= int.from_bytes(pending[:4], "big"):
            size = int.from_bytes(pending[:4], "big")
            message, pending = pending[:size], pending[size:]
            yield message


def shard_end_event(message: bytes) -> bytes | None:
    """``message`` as the last event of a closed shard's subscription (no ContinuationSequenceNumber), when it is
    an event at the tip (no records, MillisBehindLatest 0); else None."""
    buffer = EventStreamBuffer()
    buffer.add_data(message)
    parsed = next(iter(buffer))
    if parsed.headers.get(":event-type") != "SubscribeToShardEvent":
        return None
    event = json.loads(parsed.payload)
    if event.get("Records") or event.get("MillisBehindLatest"):
        return None
    event.pop("ContinuationSequenceNumber", None)
    return encode_event({key: str(value) for key, value in parsed.headers.items()}, json.dumps(event).encode())


def encode_event(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message (string headers only): prelude + CRC, headers, payload, message CRC."""
    encoded = b"".join(
        bytes([len(name.encode())]) + name.encode() + b"\x07" + struct.pack(">H", len(value.encode())) + value.encode()
        for name, value in headers.items()
    )
    prelude = struct.pack(">II", 16 + len(encoded) + len(payload), len(encoded))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + encoded + payload
    return message + struct.pack(">I", zlib.crc32(message))


def event_records(message: bytes) -> tuple[int, int]:
    """(records, record bytes) of a SubscribeToShardEvent message; (0, 0) for any other message."""
    buffer = EventStreamBuffer()
    buffer.add_data(message)
    parsed = next(iter(buffer))
    if parsed.headers.get(":event-type") != "SubscribeToShardEvent":
        return 0, 0
    records = json.loads(parsed.payload).get("Records") or []
    return len(records), sum(record_bytes(record) for record in records)
