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

MIN_MESSAGE = 16  # prelude (12 bytes) and message CRC (4): a message's length is never less


def event_messages(response: http.client.HTTPResponse) -> Iterator[bytes]:
    """The event-stream messages of a SubscribeToShard answer, whole, as they arrive (until the server ends it).

    Once a message's length is known (its first 4 bytes, big-endian), the rest of it is read in one call of exactly
    that size: kinesis-mock pushes a 16 MiB backlog in one ~21 MiB message, which, appended 64 KiB at a time to what
    had come so far, was copied ~340 times over (GiBs per event, on the relay's thread, before the client saw a byte).
    """
    pending = bytearray()
    while True:
        while len(pending) >= 4:
            size = int.from_bytes(pending[:4], "big")
            if size < MIN_MESSAGE:
                raise ValueError(f"an event-stream message of {size} bytes (at least {MIN_MESSAGE})")
            if len(pending) < size:
                break
            with memoryview(pending) as view:
                message = bytes(view[:size])
            del pending[:size]
            yield message
        wanted = size - len(pending) if len(pending) >= 4 else None
        chunk = response.read1(65536) if wanted is None else response.read(wanted)
        if not chunk:
            return
        pending += chunk


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
