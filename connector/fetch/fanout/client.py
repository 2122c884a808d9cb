"""The enhanced fan-out transport that tasks use: ``BrokeredSubscriber`` reads a shard's pages from its job's
subscription broker on this host (``fanout.broker``, started here under a lock file when none answers, the job's
secret, drawn on the driver in ``EfoSettings``, handed to it on its stdin), else direct through a
``fanout.subscriber.ShardSubscriber`` (logged). Who calls it: ``SourceSettings.transport`` returns one for
``kinesis.consumerType=SubscribeToShard``, and the range reader (``fetch.range.ShardRange``, in an executor's Python
worker, or on the driver when the planner completes an unread read) iterates its ``pages(start)``. A broker lost
mid-read is started again and the read goes on after the last record it returned; the broker's directory (this
user's alone: ``pyspark_aws_kinesis.private``), its uid and its replies (``fanout.protocol``) are checked, any of
them refused means one warning and a direct read, and ``AWS_KINESIS_EFO_BROKER=off`` always reads direct
(docs/source.md, "Enhanced fan-out"; docs/security.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import logging
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ...aws.settings import ClientSettings
from ...detached import spawn_detached
from ...errors import KinesisConnectorError
from ...positions import AFTER_SEQUENCE_NUMBER, Position
from ...private import open_private_dir, open_private_file, socket_address, user_temp_path
from ...retry import RetryPolicy
from ..decode import Page, ShardContext
from ..iterators import PositionGoneError, ShardGoneError
from .protocol import (
    ENV_DIR,
    NEXT,
    ProtocolError,
    Request,
    check_peer,
    job_name,
    page_from_wire,
    receive,
    send,
    socket_name,
)
from .subscriber import ShardSubscriber, SubscriptionError, subscription_client

log = logging.getLogger(__name__)

ENV_ENABLED = "AWS_KINESIS_EFO_BROKER"
START_TIMEOUT_S = 15.0
RECONNECTS = 3  # a broker lost this many times in one read: go on direct
_ERRORS: dict[str, type[Exception]] = {
    "PositionGoneError": PositionGoneError,
    "ShardGoneError": ShardGoneError,
    "SubscriptionError": SubscriptionError,
}


class BrokerUnavailableError(KinesisConnectorError, OSError):
    """No broker answers and none could be started."""


def broker_dir() -> str:
    return os.environ.get(ENV_DIR) or user_temp_path("aws-kinesis-efo")


def _connect(address: str) -> socket.socket:
    """A connection to the socket at ``address`` whose peer runs as this user (ProtocolError otherwise)."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(address)
        check_peer(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def connect_broker(secret: str) -> socket.socket:
    """A connection to the broker of the job ``secret`` names, starting one when nobody answers. Raises
    BrokerUnavailableError when that fails, NotPrivateError for a directory not this user's alone, ProtocolError
    for a peer of another uid."""
    directory = broker_dir()
    dir_fd = open_private_dir(directory)
    try:
        address = socket_address(dir_fd, directory, socket_name(job_name(secret)))
        with contextlib.suppress(FileNotFoundError, ConnectionRefusedError):
            return _connect(address)
        with open(open_private_file(dir_fd, "start.lock", os.O_WRONLY | os.O_CREAT)) as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one starter at a time; the others find it running
            with contextlib.suppress(FileNotFoundError, ConnectionRefusedError):
                return _connect(address)
            broker = _start_broker(directory, secret)
            deadline = time.monotonic() + START_TIMEOUT_S
            while time.monotonic() < deadline and broker.poll() is None:
                try:
                    return _connect(address)
                except (FileNotFoundError, ConnectionRefusedError):
                    time.sleep(0.05)
        raise BrokerUnavailableError(f"no subscription broker answers in {directory} (exit code {broker.poll()})")
    finally:
        os.close(dir_fd)


def _start_broker(directory: str, secret: str) -> subprocess.Popen:
    """``python -m pyspark_aws_kinesis.fetch.fanout.broker`` in its own session (a kill of this process group spares
    it), watching this process's parent (in a Spark worker: the Python daemon, which lives as long as the executor).
    The job's secret goes through a pipe: argv and the environment are readable by other processes."""
    log.info("starting the enhanced fan-out subscription broker in %s", directory)
    broker = spawn_detached(f"{__package__}.broker", directory, str(os.getppid()), stdin=subprocess.PIPE)
    assert broker.stdin is not None
    broker.stdin.write(secret.encode() + b"\n")
    broker.stdin.close()
    threading.Thread(target=broker.wait, name="efo broker reaper", daemon=True).start()  # no zombie when it exits
    return broker


def broker_stats(secret: str) -> dict[str, dict]:
    """The subscriptions and buffers of the job ``secret`` names ({} when its broker does not run): for tests and
    diagnosis."""
    directory = broker_dir()
    dir_fd = open_private_dir(directory)
    try:
        conn = _connect(socket_address(dir_fd, directory, socket_name(job_name(secret))))
    except (FileNotFoundError, ConnectionRefusedError):
        return {}
    finally:
        os.close(dir_fd)
    with conn:
        send(conn, {"secret": secret, "kind": "stats"})
        stats, _ = receive(conn)
        return stats


def broker_pids(directory: str) -> list[int]:
    """The brokers with a pid file in ``directory`` (every job's): for tests and diagnosis."""
    pids = []
    for path in glob.glob(os.path.join(directory, "broker-*.pid")):
        with contextlib.suppress(OSError, ValueError), open(path) as handle:
            pids.append(int(handle.read()))
    return pids


@dataclass
class BrokeredSubscriber:
    """A ``ShardTransport`` reading one shard through one consumer via the broker (see the module doc)."""

    settings: ClientSettings
    timeout_s: float
    retry: RetryPolicy
    consumer_arn: str
    consumer_name: str
    context: ShardContext
    secret: str = field(repr=False)  # the job's (EfoSettings.broker_secret): its broker serves no one else
    direct_reads: int = 0  # reads (or their rests) that went direct
    _direct: list[ShardSubscriber] = field(default_factory=list, repr=False)  # their subscribers

    @property
    def refused_calls(self) -> int:
        """SubscribeToShard calls Kinesis refused in this transport's direct reads, for the read's result (the
        broker counts its own subscriptions' refusals in its stats)."""
        return sum(subscriber.refused_calls for subscriber in self._direct)

    def pages(self, start: Position, wanted: Callable[[], int | None] | None = None) -> Iterator[Page]:
        if os.environ.get(ENV_ENABLED, "on").lower() == "off":
            yield from self._read_direct(start, wanted)
            return
        position, lost = start, 0
        while True:
            try:
                conn = connect_broker(self.secret)
            except (OSError, ProtocolError) as exc:
                log.warning("reading %s without the subscription broker: %s", self.what, exc)
                yield from self._read_direct(position, wanted)
                return
            try:
                with conn:
                    for page in self._served(conn, position):
                        yield page
                        if page.last_sequence is not None:  # pages end at a Kinesis record's end
                            position = Position(AFTER_SEQUENCE_NUMBER, page.last_sequence)
                        if page.next_iterator is None:
                            return
            except ProtocolError as exc:
                log.warning("refused the subscription broker's reply reading %s (%s); going on direct", self.what, exc)
                yield from self._read_direct(position, wanted)
                return
            except (OSError, EOFError) as exc:
                lost += 1
                if lost >= RECONNECTS:
                    log.warning("lost the subscription broker %d times reading %s; going on direct", lost, self.what)
                    yield from self._read_direct(position, wanted)
                    return
                log.warning("lost the subscription broker reading %s (%s); resuming at %s", self.what, exc, position)

    @property
    def what(self) -> str:
        return self.context.label

    def _served(self, conn: socket.socket, position: Position) -> Iterator[Page]:
        request = Request(
            self.settings, self.timeout_s, self.retry, self.consumer_arn, self.consumer_name, self.context, position
        )
        send(conn, {"secret": self.secret, "kind": "read", "request": request.to_json()})
        while True:
            conn.sendall(NEXT)
            reply, blob = receive(conn)
            kind = reply.get("kind")
            if kind == "page":
                yield page_from_wire(reply.get("page"), blob)
            elif kind == "tip" and set(reply) == {"kind"}:
                yield Page(next_iterator="tip", millis_behind_latest=0)
            elif kind == "error" and isinstance(reply.get("name"), str) and isinstance(reply.get("message"), str):
                name, message = reply["name"], reply["message"]
                raise _ERRORS.get(name, SubscriptionError)(message if name in _ERRORS else f"{name}: {message}")
            else:
                raise ProtocolError(f"a reply that is not a page, a tip or an error: {reply!r:.200}")

    def _read_direct(self, start: Position, wanted: Callable[[], int | None] | None) -> Iterator[Page]:
        self.direct_reads += 1
        client = subscription_client(self.settings, self.timeout_s)
        subscriber = ShardSubscriber(client, self.consumer_arn, self.context, self.retry, self.consumer_name)
        self._direct.append(subscriber)
        yield from subscriber.pages(start, wanted)
