"""The enhanced fan-out transport that tasks use: pages from this host's subscription broker, or direct.

Who calls it: ``SourceSettings.transport`` returns a ``BrokeredSubscriber`` for ``kinesis.consumerType=
SubscribeToShard``; the range reader (``fetch.range.ShardRange``, in an executor's Python worker, or on the driver
when the planner completes an unread read) iterates its ``pages(start)`` like any ``ShardTransport``.

``pages(start)`` connects to the broker (``fetch.efo_broker``; started here, under a lock file, when nobody answers)
and streams pages of the subscription the broker keeps open across micro-batches, so a batch's read costs no
SubscribeToShard call when the previous batch's read left the subscription where this one starts. When the
broker cannot be reached or started, it reads through a direct ``fetch.efo.ShardSubscriber`` (logged). When the
broker goes away mid-read, it reconnects (a new broker starts) and goes on after the last record it returned:
nothing is lost or repeated.

The broker's directory is ``$AWS_KINESIS_EFO_BROKER_DIR`` or ``<temp dir>/aws-kinesis-efo-<uid>``, created 0700 and
refused unless it is this user's and private (requests carry client settings, pickled). ``AWS_KINESIS_EFO_BROKER=
off`` reads direct always (one subscription per read).
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..aws.settings import ClientSettings
from ..detached import spawn_detached
from ..positions import AFTER_SEQUENCE_NUMBER, Position
from ..retry import RetryPolicy
from .decode import Page, ShardContext
from .efo import ShardSubscriber, SubscriptionError, subscription_client
from .efo_protocol import ENV_DIR, NEXT, Request, receive, send, socket_path
from .iterators import PositionGoneError, ShardGoneError

log = logging.getLogger(__name__)

ENV_ENABLED = "AWS_KINESIS_EFO_BROKER"
START_TIMEOUT_S = 15.0
RECONNECTS = 3  # a broker lost this many times in one read: go on direct
_ERRORS: dict[str, type[Exception]] = {
    "PositionGoneError": PositionGoneError,
    "ShardGoneError": ShardGoneError,
    "SubscriptionError": SubscriptionError,
}


class BrokerUnavailableError(OSError):
    """No broker answers and none could be started."""


def broker_dir() -> str:
    return os.environ.get(ENV_DIR) or os.path.join(tempfile.gettempdir(), f"aws-kinesis-efo-{os.getuid()}")


def _private_dir(directory: str) -> str:
    """``directory``, created 0700; BrokerUnavailableError unless it is this user's and nobody else's."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    info = os.stat(directory)
    if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
        raise BrokerUnavailableError(f"{directory} is not private to this user (mode {stat.S_IMODE(info.st_mode):o})")
    return directory


def _connect(path: str) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
    except OSError:
        conn.close()
        raise
    return conn


def connect_broker() -> socket.socket:
    """A connection to this host's broker, starting one when nobody answers (BrokerUnavailableError if that fails)."""
    directory = _private_dir(broker_dir())
    path = socket_path(directory)
    try:
        return _connect(path)
    except OSError:
        pass
    with open(os.path.join(directory, "start.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one starter at a time; the others find it running
        try:
            return _connect(path)
        except OSError:
            pass
        broker = _start_broker(directory)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and broker.poll() is None:
            try:
                return _connect(path)
            except OSError:
                time.sleep(0.05)
    raise BrokerUnavailableError(f"no subscription broker answers at {path} (exit code {broker.poll()})")


def _start_broker(directory: str) -> subprocess.Popen:
    """``python -m connector.fetch.efo_broker`` in its own session (a kill of this process group spares it),
    watching this process's parent (in a Spark worker: the Python daemon, which lives as long as the executor)."""
    log.info("starting the enhanced fan-out subscription broker in %s", directory)
    broker = spawn_detached(f"{__package__}.efo_broker", directory, str(os.getppid()))  # not imported here
    threading.Thread(target=broker.wait, name="efo broker reaper", daemon=True).start()  # no zombie when it exits
    return broker


def broker_stats() -> dict[str, dict]:
    """The broker's subscriptions and their buffers ({} when none runs): for tests and diagnosis."""
    try:
        conn = _connect(socket_path(broker_dir()))
    except OSError:
        return {}
    with conn:
        send(conn, "stats")
        return receive(conn)


@dataclass
class BrokeredSubscriber:
    """A ``ShardTransport`` reading one shard through one consumer via the broker (see the module doc)."""

    settings: ClientSettings
    timeout_s: float
    retry: RetryPolicy
    consumer_arn: str
    consumer_name: str
    context: ShardContext
    direct_reads: int = 0  # reads (or their rests) that went direct

    def pages(self, start: Position, wanted: Callable[[], int | None] | None = None) -> Iterator[Page]:
        if os.environ.get(ENV_ENABLED, "on").lower() == "off":
            yield from self._direct(start, wanted)
            return
        position, lost = start, 0
        while True:
            try:
                conn = connect_broker()
            except OSError as exc:
                log.warning("reading %s without the subscription broker: %s", self.context.shard_id, exc)
                yield from self._direct(position, wanted)
                return
            try:
                with conn:
                    for page in self._served(conn, position):
                        yield page
                        if page.last_sequence is not None:  # pages end at a Kinesis record's end
                            position = Position(AFTER_SEQUENCE_NUMBER, page.last_sequence)
                        if page.next_iterator is None:
                            return
            except (OSError, EOFError) as exc:
                lost += 1
                if lost >= RECONNECTS:
                    log.warning("lost the subscription broker %d times reading %s; going on direct", lost, self.what)
                    yield from self._direct(position, wanted)
                    return
                log.warning("lost the subscription broker reading %s (%s); resuming at %s", self.what, exc, position)

    @property
    def what(self) -> str:
        return self.context.label

    def _served(self, conn: socket.socket, position: Position) -> Iterator[Page]:
        request = Request(
            self.settings, self.timeout_s, self.retry, self.consumer_arn, self.consumer_name, self.context, position
        )
        send(conn, request)
        while True:
            conn.sendall(NEXT)
            kind, body = receive(conn)
            if kind == "error":
                name, message = body
                raise _ERRORS.get(name, SubscriptionError)(message if name in _ERRORS else f"{name}: {message}")
            yield body if kind == "page" else Page(next_iterator="tip", millis_behind_latest=0)

    def _direct(self, start: Position, wanted: Callable[[], int | None] | None) -> Iterator[Page]:
        self.direct_reads += 1
        client = subscription_client(self.settings, self.timeout_s)
        subscriber = ShardSubscriber(client, self.consumer_arn, self.context, self.retry, self.consumer_name)
        yield from subscriber.pages(start, wanted)
