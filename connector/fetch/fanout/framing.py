"""AWS event-stream messages read off a SubscribeToShard answer: the rest of each message in one read sized by its
prelude, both CRCs and the header and payload bounds checked with botocore's exceptions, headers parsed by botocore's
``EventStreamHeaderParser``. Who calls it: ``fanout.subscriber.ShardSubscriber``, for each subscription's raw HTTP
answer (the body botocore did not parse). Why not botocore's ``EventStreamBuffer`` (it copies a message once per
chunk read): docs/source.md, "Enhanced fan-out", and bench/efo_framing.py.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from botocore.eventstream import (
    ChecksumMismatch,
    EventStreamHeaderParser,
    InvalidHeadersLength,
    InvalidPayloadLength,
)

from ...errors import KinesisConnectorError

# A message: the prelude, the headers, the payload and the CRC32 of everything before it (AWS's format).
PRELUDE = struct.Struct(">III")  # total length, headers length, CRC32 of the first 8 bytes
_CRC = struct.Struct(">I")
MAX_HEADERS = 128 * 1024  # botocore's bounds
MAX_PAYLOAD = 24 * 1024 * 1024
_OVERHEAD = PRELUDE.size + _CRC.size


class TruncatedMessageError(KinesisConnectorError, ConnectionError):
    """The event stream ended inside a message (a connection cut mid-event: worth a new subscription)."""


@dataclass(frozen=True)
class Message:
    """One event-stream message: its headers (name -> value, as botocore parses them) and its payload."""

    headers: dict[str, Any]
    payload: bytes


def messages(read: Callable[[int], bytes]) -> Iterator[Message]:
    """The messages of an event stream until it ends between two messages. ``read(n)`` returns up to ``n`` bytes
    (b"" at the end), like ``urllib3.HTTPResponse.read``; short reads are asked again for the rest."""
    parser = EventStreamHeaderParser()
    while True:
        prelude = _read_exactly(read, PRELUDE.size, at_start=True)
        if prelude is None:
            return
        total, headers_size, prelude_crc = PRELUDE.unpack(prelude)
        _check_crc(prelude[:8], prelude_crc)
        if headers_size > MAX_HEADERS:
            raise InvalidHeadersLength(headers_size)
        payload_size = total - _OVERHEAD - headers_size
        if not 0 <= payload_size <= MAX_PAYLOAD:
            raise InvalidPayloadLength(payload_size)
        rest = _read_exactly(read, total - PRELUDE.size)
        assert rest is not None
        (message_crc,) = _CRC.unpack_from(rest, len(rest) - _CRC.size)
        _check_crc(rest, message_crc, zlib.crc32(prelude), end=len(rest) - _CRC.size)
        yield Message(parser.parse(rest[:headers_size]), rest[headers_size : headers_size + payload_size])


def _check_crc(data: bytes, expected: int, crc: int = 0, end: int | None = None) -> None:
    computed = zlib.crc32(memoryview(data)[:end], crc) & 0xFFFFFFFF
    if computed != expected:
        raise ChecksumMismatch(expected, computed)


def _read_exactly(read: Callable[[int], bytes], size: int, at_start: bool = False) -> bytes | None:
    """``size`` bytes in as few ``read`` calls as the source allows (one, when it fills the request); None when the
    stream ends before the first byte of a message (``at_start``), TruncatedMessageError when it ends inside one."""
    first = read(size)
    if len(first) == size:
        return first
    if not first and at_start:
        return None
    pieces, got = [first], len(first)
    while got < size:
        piece = read(size - got)
        if not piece:
            raise TruncatedMessageError(f"the event stream ended {got} bytes into a read of {size}")
        pieces.append(piece)
        got += len(piece)
    return b"".join(pieces)
