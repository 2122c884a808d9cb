"""What a task and its job's subscription broker say to each other over the broker's Unix socket: data only.
Who calls it: ``fanout.client.BrokeredSubscriber`` (a task's side) and ``fanout.broker`` (the broker's side). One
connection is one task's ``pages(start)``: the client sends ``{"secret", "kind": "read", "request": Request}`` (or
``{"secret", "kind": "stats"}``), then ``NEXT`` (b"n") for each page it wants; the broker answers each with
``{"kind": "page", "page": {...}}`` and the rows' data, ``{"kind": "tip"}`` or ``{"kind": "error", "name",
"message"}`` (or the stats, a JSON object). A frame is two big-endian u32 (the JSON's length, the blob's length), the
UTF-8 JSON and the blob (a page's record payloads, back to back; their sizes are in the JSON); nothing is unpickled
or evaluated, and a message not exactly this shape raises ProtocolError. The socket is ``broker-<PROTOCOL>-<job>.sock``
in a private directory (``$AWS_KINESIS_EFO_BROKER_DIR``, else ``<temp dir>/aws-kinesis-efo-<uid>``:
``pyspark_aws_kinesis.private``), ``<job>`` a digest of the job's secret (``job_name``), which the reader draws on
the driver and hands to its tasks and to its broker; both ends check the peer's uid (``SO_PEERCRED``) and the broker
compares the secret in constant time before doing anything a request asks (docs/security.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import struct
from dataclasses import asdict, dataclass, fields
from typing import Any

from ...aws.settings import AssumeRole, ClientSettings
from ...errors import KinesisConnectorError
from ...positions import Position
from ...retry import RetryPolicy
from ..decode import Page, ShardContext

# Names the socket, so that a broker of another version (still running from an earlier install) is never spoken to:
# bump it when a message changes (3: JSON frames, a job secret, peer checks; 2: pickle).
PROTOCOL = 3
NEXT = b"n"
ENV_DIR = "AWS_KINESIS_EFO_BROKER_DIR"
_HEADER = struct.Struct(">II")
MAX_JSON = 16 << 20  # a page's bookkeeping (keys, sequence numbers) for up to 10,000 records fits many times over
MAX_BLOB = 256 << 20


class ProtocolError(KinesisConnectorError, ValueError):
    """A message that is not what the protocol allows (or a peer of another user)."""


def job_name(secret: str) -> str:
    """The part of a job's socket name that its secret decides (a digest: the name is visible, the secret not)."""
    return hashlib.sha256(secret.encode()).hexdigest()[:16]


def socket_name(job: str) -> str:
    return f"broker-{PROTOCOL}-{job}.sock"


def pid_name(job: str) -> str:
    return f"broker-{PROTOCOL}-{job}.pid"


def expected_peer_uid() -> int:
    """The only uid either end talks to: its own."""
    return os.getuid()


def check_peer(conn: socket.socket) -> None:
    """ProtocolError unless the process at the other end of ``conn`` runs as ``expected_peer_uid()`` (checked
    where the kernel says, ``SO_PEERCRED``; platforms without it rely on the private directory alone)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return
    pid, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i")))
    if uid != expected_peer_uid():
        raise ProtocolError(f"the peer (pid {pid}) runs as uid {uid}, not {expected_peer_uid()}")


def send(conn: socket.socket, message: dict[str, Any], blob: bytes = b"") -> None:
    """One frame: ``message`` as JSON, then ``blob``."""
    body = json.dumps(message, separators=(",", ":")).encode()
    conn.sendall(_HEADER.pack(len(body), len(blob)) + body + blob)


def receive(conn: socket.socket) -> tuple[dict[str, Any], bytes]:
    """One frame: (its JSON object, its blob). EOFError when the other side closed; ProtocolError for anything else
    than a JSON object within the size bounds."""
    size, blob_size = _HEADER.unpack(_read_exactly(conn, _HEADER.size))
    if size > MAX_JSON or blob_size > MAX_BLOB:
        raise ProtocolError(f"a frame of {size} + {blob_size} bytes (allowed: {MAX_JSON} + {MAX_BLOB})")
    try:
        message = json.loads(_read_exactly(conn, size))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"a frame that is not JSON ({exc})") from None
    if not isinstance(message, dict):
        raise ProtocolError(f"a frame that is not a JSON object but {type(message).__name__}")
    return message, _read_exactly(conn, blob_size)


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = conn.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _build(cls: type, value: Any, **nested: Any) -> Any:
    """``cls(**value)``, ``value`` a JSON object with exactly ``cls``'s fields of the types JSON gives."""
    names = {item.name for item in fields(cls)}
    if not isinstance(value, dict) or set(value) != names:
        raise ProtocolError(f"a {cls.__name__} must have the fields {sorted(names)}, got {value!r:.200}")
    for name, item in value.items():
        if name not in nested and not (item is None or isinstance(item, (str, int, float, bool))):
            raise ProtocolError(f"{cls.__name__}.{name} must be a JSON scalar, got {type(item).__name__}")
    try:
        return cls(**{**value, **nested})
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"a {cls.__name__} that its class refuses: {exc}") from None


@dataclass(frozen=True)
class Request:
    """What a task asks for: pages of one shard through one consumer from ``start``, and how to subscribe."""

    settings: ClientSettings
    timeout_s: float
    retry: RetryPolicy
    arn: str
    name: str
    context: ShardContext
    start: Position

    @property
    def identity(self) -> str:
        """A digest of everything that says who subscribes (keys, token, role, external ID, endpoint, region): a
        buffer opened with one identity never serves a request of another."""
        return hashlib.sha256(json.dumps(asdict(self.settings), sort_keys=True).encode()).hexdigest()

    @property
    def key(self) -> tuple[str, str, str]:
        return self.identity, self.arn, self.context.shard_id

    @property
    def profile(self) -> tuple[Any, ...]:
        """What must match for an open subscription to serve this request."""
        return self.settings, self.timeout_s, self.retry, self.name, self.context

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: Any) -> Request:
        """The request ``value`` describes; ProtocolError unless it is exactly a request's shape."""
        if not isinstance(value, dict):
            raise ProtocolError(f"a request must be a JSON object, got {type(value).__name__}")
        settings = value.get("settings")
        if not isinstance(settings, dict):
            raise ProtocolError("a request's settings must be a JSON object")
        role = settings.get("role")
        client = _build(
            ClientSettings,
            settings,
            retry=_build(RetryPolicy, settings.get("retry")),
            role=None if role is None else _build(AssumeRole, role),
        )
        return _build(
            cls,
            value,
            settings=client,
            retry=_build(RetryPolicy, value.get("retry")),
            context=_build(ShardContext, value.get("context")),
            start=_build(Position, value.get("start")),
        )


# The exact types JSON gives each field (exact: a bool is not an int here).
_NONE = type(None)
_PAGE_LISTS = {"keys": {str}, "sequences": {str}, "subs": {int}, "arrivals_us": {int, _NONE}, "record_ends": {bool}}
_PAGE_SCALARS = {
    "kinesis_records": {int},
    "last_sequence": {str, _NONE},
    "dropped_out_of_range": {int},
    "next_iterator": {str, _NONE},
    "millis_behind_latest": {int, _NONE},
    "at_tip": {bool},
}


def page_to_wire(page: Page) -> tuple[dict[str, Any], bytes]:
    """A page as (JSON object, blob of its rows' data)."""
    message = {name: getattr(page, name) for name in (*_PAGE_LISTS, *_PAGE_SCALARS)}
    message["sizes"] = [len(item) for item in page.data]
    return message, b"".join(page.data)


def page_from_wire(message: Any, blob: bytes) -> Page:
    """The page ``page_to_wire`` made; ProtocolError unless every field has its type and every column its length."""
    if not isinstance(message, dict) or set(message) != {*_PAGE_LISTS, *_PAGE_SCALARS, "sizes"}:
        raise ProtocolError(f"a page with other fields than a page's: {message!r:.200}")
    sizes = message["sizes"]
    if not isinstance(sizes, list) or not {type(size) for size in sizes} <= {int} or min(sizes, default=0) < 0:
        raise ProtocolError("a page's sizes must be a list of sizes")
    if sum(sizes) != len(blob):
        raise ProtocolError(f"a page's rows add up to {sum(sizes)} bytes, the frame carries {len(blob)}")
    for name, kinds in _PAGE_LISTS.items():
        column = message[name]
        if not isinstance(column, list) or len(column) != len(sizes) or not set(map(type, column)) <= kinds:
            raise ProtocolError(f"a page's {name} must be {len(sizes)} values of {_names(kinds)}")
    for name, kinds in _PAGE_SCALARS.items():
        if type(message[name]) not in kinds:
            raise ProtocolError(f"a page's {name} must be {_names(kinds)}, got {message[name]!r:.100}")
    data, offset = [], 0
    for size in sizes:
        data.append(blob[offset : offset + size])
        offset += size
    return Page(data=data, **{name: message[name] for name in (*_PAGE_LISTS, *_PAGE_SCALARS)})


def _names(kinds: set[type]) -> str:
    return " or ".join(sorted("null" if kind is _NONE else kind.__name__ for kind in kinds))
