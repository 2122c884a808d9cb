"""What a task and this host's subscription broker say to each other, over the broker's Unix socket.

Who calls it: ``efo_client.BrokeredSubscriber`` (a task's side) and ``efo_broker`` (the broker's side); see
``efo_broker`` for what the broker does. The socket is ``<dir>/broker-<PROTOCOL>.sock``; ``<dir>``
(``$AWS_KINESIS_EFO_BROKER_DIR``, else a default the client picks) is private: 0700, this user's. One connection
= one ``pages(start)`` call of one task:

    client -> broker   a Request (settings, timeout_s, retry, arn, name, context, start)   (framed pickle)
    client -> broker   NEXT (b"n") for each page it wants
    broker -> client   ("page", Page) | ("tip", None) | ("error", (class name, message))

Messages are pickled (the directory is private to this user, so only this user's processes can connect), so
the module paths of the classes they carry are part of the protocol: ``PROTOCOL`` changes with them.
"""

from __future__ import annotations

import os
import pickle
import socket
import struct
from dataclasses import dataclass
from typing import Any

from ..aws.settings import ClientSettings
from ..positions import Position
from ..retry import RetryPolicy
from .decode import ShardContext

# The version of what client and broker pickle to each other: a request names the module paths of its classes
# (ClientSettings, ShardContext, Position, ...), a page those of Page. It names the socket (``socket_path``), so a
# broker of another version, still running from an earlier install, is never spoken to: bump it whenever one of
# those classes changes or moves (2: the modules moved into packages, e.g. ``decode`` under ``fetch``).
PROTOCOL = 2
NEXT = b"n"
ENV_DIR = "AWS_KINESIS_EFO_BROKER_DIR"
_HEADER = struct.Struct(">Q")


def socket_path(directory: str) -> str:
    return os.path.join(directory, f"broker-{PROTOCOL}.sock")


def pid_path(directory: str) -> str:
    return os.path.join(directory, f"broker-{PROTOCOL}.pid")


def send(conn: socket.socket, message: Any) -> None:
    """One framed message (the socket's directory is private to this user: pickle is safe here)."""
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    conn.sendall(_HEADER.pack(len(body)) + body)


def receive(conn: socket.socket) -> Any:
    """One framed message; EOFError when the other side closed."""
    (size,) = _HEADER.unpack(_read_exactly(conn, _HEADER.size))
    return pickle.loads(_read_exactly(conn, size))


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = conn.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


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
    def key(self) -> tuple[str, str]:
        return self.arn, self.context.shard_id

    @property
    def profile(self) -> tuple[Any, ...]:
        """What must match for an open subscription to serve this request."""
        return self.settings, self.timeout_s, self.retry, self.name, self.context
