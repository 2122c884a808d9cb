"""The subscription broker: one process per query and host that keeps enhanced fan-out subscriptions open across
micro-batches and serves their pages to the tasks that read the shards (Kinesis refuses a new SubscribeToShard on a
consumer+shard within 5 s of the last, and the worker reading a shard changes from batch to batch). Who calls it:
``fanout.client`` starts it when no broker of its job answers (``python -m pyspark_aws_kinesis.fetch.fanout.broker
<dir> <pid>``, its own session, the job's secret on its stdin: never in argv or the environment) and talks to it
over ``fanout.protocol``, one connection per ``pages(start)``. Each (credentials' identity, consumer ARN, shard) has a
``Subscription``: a ``fanout.subscriber.ShardSubscriber`` pumped into a buffer bounded in bytes, which serves a
request at a position it covers and resubscribes for any other. Idle subscriptions close and an idle broker exits
(``AWS_KINESIS_EFO_BROKER_*`` below); the behaviour: docs/source.md, "Enhanced fan-out"; the checks: docs/security.md.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import os
import socket
import socketserver
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from ...positions import AFTER_SEQUENCE_NUMBER, AT_SEQUENCE_NUMBER, WHOLE_RECORD, Position
from ...private import NotPrivateError, PrivateLog, open_private_dir, open_private_file, socket_address
from ..decode import Page
from ..range import skipped_rows
from .protocol import (
    NEXT,
    ProtocolError,
    Request,
    check_peer,
    job_name,
    page_to_wire,
    pid_name,
    receive,
    send,
    socket_name,
)
from .subscriber import ShardSubscriber, subscription_client

log = logging.getLogger(__name__)

ENV_IDLE_CLOSE = "AWS_KINESIS_EFO_BROKER_IDLE_CLOSE_S"
ENV_IDLE_EXIT = "AWS_KINESIS_EFO_BROKER_IDLE_EXIT_S"
ENV_MAX_BUFFER = "AWS_KINESIS_EFO_BROKER_MAX_BUFFER_BYTES"
_ROW_OVERHEAD = 64  # bytes counted per row beyond its data (key, sequence number, ...)


def page_bytes(page: Page) -> int:
    return sum(map(len, page.data)) + _ROW_OVERHEAD * len(page)


def cut(page: Page, start: int) -> Page:
    """Rows ``start:`` of ``page`` (the same Kinesis records' bookkeeping)."""
    if start == 0:
        return page
    columns = ("data", "keys", "sequences", "subs", "arrivals_us", "record_ends")
    return replace(page, **{name: getattr(page, name)[start:] for name in columns})


def locate(buffer: list[Page], base: str | None, origin: Position, position: Position) -> tuple[int, int] | None:
    """(index in ``buffer``, first row) where a read from ``position`` continues, or None if the buffer does not
    cover it. ``buffer`` holds a subscription's pages from ``origin`` on, less the pages already dropped, the last
    Kinesis record of which was ``base`` (None: none dropped). The index may be ``len(buffer)``: the next page."""
    if base is None and position == origin:
        return 0, 0
    if position.kind not in (AT_SEQUENCE_NUMBER, AFTER_SEQUENCE_NUMBER):
        return None
    sequence = position.sequence_number
    whole_after = position.kind == AFTER_SEQUENCE_NUMBER and position.sub_sequence_number == WHOLE_RECORD
    if whole_after and sequence == base:
        return 0, 0
    for index, page in enumerate(buffer):
        if sequence in page.sequences:
            row = skipped_rows(position, page, page.sequences.index(sequence))
            return (index, row) if row < len(page) else (index + 1, 0)  # none of its rows is after them
        if whole_after and page.last_sequence == sequence:
            return index + 1, 0
    return None


class Subscription:
    """One consumer+shard's open subscription, its bounded buffer of pages and its pump thread.

    Pages are numbered from 0 in arrival order; ``buffer`` holds numbers ``first`` .. ``first + len - 1``.
    ``base`` is the last Kinesis record (sequence number) of the pages dropped so far (None: none dropped, the
    buffer still starts at ``origin``). One task at a time reads it (``lease``).
    """

    def __init__(self, request: Request, max_bytes: int):
        self.profile = request.profile
        self.origin = request.start
        self.max_bytes = max_bytes
        self.lease = threading.Lock()
        self.cond = threading.Condition()
        self.buffer: deque[Page] = deque()
        self.first = 0
        self.bytes = 0
        self.base: str | None = None
        self.behind: int | None = None  # millisBehindLatest of the last event
        self.error: BaseException | None = None
        self.ended = False
        self.used = time.monotonic()
        client = subscription_client(request.settings, request.timeout_s)
        self.subscriber = ShardSubscriber(client, request.arn, request.context, request.retry, request.name)
        self.thread = threading.Thread(target=self._pump, name=f"pump {request.context.shard_id}", daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        pages = self.subscriber.pages(self.origin)
        try:
            for page in pages:
                with self.cond:
                    self.behind = page.millis_behind_latest
                    if page.kinesis_records or page.next_iterator is None:  # an empty event only says "behind"
                        page.drop_columns()  # the buffer's bound counts the data once: the wire sends the lists
                        self.buffer.append(page)
                        self.bytes += page_bytes(page)
                    self.cond.notify_all()
                    # Back-pressure: no more reading from the event stream while the buffer is full.
                    while self.bytes >= self.max_bytes and not self.subscriber.aborted:
                        self.cond.wait()
        except BaseException as exc:  # handed to the next task that reads past the buffer
            with self.cond:
                self.error = exc
        finally:
            pages.close()
            with self.cond:
                self.ended = True
                self.cond.notify_all()

    def close(self) -> None:
        """End the subscription (its socket closed at once) and wait for the pump to finish."""
        with self.cond:
            self.subscriber.abort()
            self.cond.notify_all()
        self.thread.join(timeout=30)

    def locate(self, position: Position) -> tuple[int, int] | None:
        """(page number, first row) where ``position`` continues in the buffer, or None if it does not cover it."""
        with self.cond:
            if self.error is not None:
                return None
            found = locate(list(self.buffer), self.base, self.origin, position)
            return None if found is None else (self.first + found[0], found[1])

    def take(self, number: int) -> tuple[str, Any]:
        """Page ``number`` (pages before it are dropped: the task went through them), a tip, or the pump's error;
        blocks until one of them is known."""
        with self.cond:
            self._drop_before(number)
            self.used = time.monotonic()
            while True:
                if self.buffer and self.first == number:
                    return "page", self.buffer[0]
                if self.error is not None:
                    return "error", (type(self.error).__name__, str(self.error))
                if self.ended:
                    return "error", ("SubscriptionError", f"the subscription to {self.subscriber.what} was closed")
                if self.behind == 0:
                    return "tip", None
                self.cond.wait()

    def _drop_before(self, number: int) -> None:
        while self.buffer and self.first < number:
            page = self.buffer.popleft()
            self.first += 1
            self.bytes -= page_bytes(page)
            if page.last_sequence is not None:
                self.base = page.last_sequence
        self.cond.notify_all()  # the pump may read again

    def stats(self) -> dict[str, Any]:
        with self.cond:
            sizes = [page_bytes(page) for page in self.buffer]
            return {
                "pages": len(sizes),
                "bytes": self.bytes,
                "largest_page": max(sizes, default=0),
                "max_bytes": self.max_bytes,
                "calls": self.subscriber.calls,
                "refused_calls": self.subscriber.refused_calls,
                "paused": self.bytes >= self.max_bytes,
            }


class Broker:
    """The job's subscriptions on this host, keyed by (credentials' identity, consumer ARN, shard id); one task at a
    time per key (its lease). Serves only requests that present ``secret``."""

    def __init__(self, max_bytes: int, idle_close_s: float, secret: str):
        self.max_bytes = max_bytes
        self.idle_close_s = idle_close_s
        self.secret = secret.encode()
        self.subscriptions: dict[tuple[str, str, str], Subscription] = {}
        # A lease lives while its key has a subscription or a task holding or awaiting it: shards come and go with
        # reshards, and a broker can run for months.
        self.leases: dict[tuple[str, str, str], _Lease] = {}
        self.lock = threading.Lock()
        self.connections = 0
        self.last_busy = time.monotonic()

    def serve(self, conn: socket.socket) -> None:
        """One client connection: a request (or "stats"), then a page for each NEXT. ProtocolError (nothing done)
        for a peer of another uid, a malformed frame or request, or a wrong secret."""
        check_peer(conn)
        message, _ = receive(conn)
        secret = message.get("secret")
        if not isinstance(secret, str) or not hmac.compare_digest(secret.encode(), self.secret):
            raise ProtocolError("a request without this job's secret")
        if message.get("kind") == "stats":
            with self.lock:
                items = self.subscriptions.items()
                stats = {f"{arn}/{shard} {who[:8]}": sub.stats() for (who, arn, shard), sub in items}
            send(conn, stats)
            return
        if message.get("kind") != "read":
            raise ProtocolError(f"a request of kind {message.get('kind')!r:.50} (allowed: read, stats)")
        request = Request.from_json(message.get("request"))
        with self.lease(request.key):
            subscription, (number, row) = self._positioned(request)
            try:
                while conn.recv(1) == NEXT:
                    kind, body = subscription.take(number)
                    if kind == "page":
                        page, blob = page_to_wire(cut(body, row))
                        row, number = 0, number + 1
                        send(conn, {"kind": kind, "page": page}, blob)
                    elif kind == "error":
                        send(conn, {"kind": kind, "name": body[0], "message": body[1]})
                        return
                    else:
                        send(conn, {"kind": kind})
            finally:
                subscription.used = time.monotonic()

    @contextlib.contextmanager
    def lease(self, key: tuple[str, str, str], wait: bool = True) -> Iterator[bool]:
        """Hold ``key``'s lease (one task at a time per credentials+consumer+shard); yields False when ``wait`` is
        False and another holds it. The lease is forgotten once nobody uses it and the key has no subscription."""
        with self.lock:
            entry = self.leases.setdefault(key, _Lease())
            entry.users += 1
        acquired = entry.lock.acquire(blocking=wait)
        try:
            yield acquired
        finally:
            if acquired:
                entry.lock.release()
            with self.lock:
                entry.users -= 1
                if not entry.users and key not in self.subscriptions and self.leases.get(key) is entry:
                    del self.leases[key]

    def _positioned(self, request: Request) -> tuple[Subscription, tuple[int, int]]:
        """The subscription to serve ``request`` from, and where in it: the open one when its buffer covers the
        start, else a new one at the start (the old one closed first: one subscription per consumer+shard)."""
        with self.lock:
            current = self.subscriptions.get(request.key)
        if current is not None:
            found = current.locate(request.start) if current.profile == request.profile else None
            if found is not None:
                return current, found
            log.info("resubscribing %s at %s (not in the buffer)", current.subscriber.what, request.start)
            current.close()
        fresh = Subscription(request, self.max_bytes)
        with self.lock:
            self.subscriptions[request.key] = fresh
        return fresh, (0, 0)

    def close_idle(self) -> None:
        """Close subscriptions no task read for ``idle_close_s`` (another host may need the shard)."""
        now = time.monotonic()
        with self.lock:
            idle = [key for key, sub in self.subscriptions.items() if now - sub.used > self.idle_close_s]
        for key in idle:
            with self.lease(key, wait=False) as free:
                if not free:
                    continue  # a task is reading it
                with self.lock:
                    sub = self.subscriptions[key]
                log.info("closing the idle subscription to %s", sub.subscriber.what)
                sub.close()
                with self.lock:  # dropped once closed: stats never show a gone subscription's socket still open
                    self.subscriptions.pop(key)
        with self.lock:
            if self.subscriptions or self.connections:
                self.last_busy = time.monotonic()

    def connected(self, delta: int) -> None:
        with self.lock:
            self.connections += delta
            self.last_busy = time.monotonic()


class _Lease:
    """A key's lock and how many tasks hold or await it (``Broker.lease``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0


def _env_float(name: str, default: float) -> float:
    return float(os.environ.get(name) or default)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    broker: Broker

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.exception("serving a task failed")


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        broker = self.server.broker
        broker.connected(+1)
        try:
            broker.serve(self.request)
        except (EOFError, ConnectionError):  # the task stopped reading (its generator closed): normal
            pass
        except ProtocolError as exc:
            log.warning("refused a connection: %s", exc)
        finally:
            broker.connected(-1)


def run(directory: str, watch_pid: int, secret: str) -> None:
    """The broker's main loop: serve the job ``secret`` names until idle for IDLE_EXIT_S or ``watch_pid`` is gone.
    Raises NotPrivateError unless ``directory`` is this user's private directory."""
    broker = Broker(int(_env_float(ENV_MAX_BUFFER, 16 << 20)), _env_float(ENV_IDLE_CLOSE, 10.0), secret)
    idle_exit_s = _env_float(ENV_IDLE_EXIT, 60.0)
    dir_fd = open_private_dir(directory)
    job = job_name(secret)
    name = socket_name(job)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dir_fd)  # the starter holds the start lock and found nobody answering there
    server = _Server(socket_address(dir_fd, directory, name), _Handler)
    server.broker = broker
    os.chmod(name, 0o600, dir_fd=dir_fd)
    pid_fd = open_private_file(dir_fd, pid_name(job), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with open(pid_fd, "w") as out:
        out.write(str(os.getpid()))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
    log.info("broker %d serving job %s in %s (watching %d)", os.getpid(), job, directory, watch_pid)
    try:
        while _alive(watch_pid) and time.monotonic() - broker.last_busy < idle_exit_s:
            time.sleep(min(1.0, broker.idle_close_s / 4))
            broker.close_idle()
    finally:
        log.info("broker %d exiting", os.getpid())
        for leftover in (pid_name(job), name):  # first, so that a new broker may start meanwhile
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover, dir_fd=dir_fd)
        server.shutdown()
        server.server_close()
        for sub in list(broker.subscriptions.values()):
            sub.close()


def main(directory: str, watch_pid: str) -> None:
    """The process's entry: the job's secret from stdin (one line), the log in the private directory."""
    secret = sys.stdin.readline().strip()
    try:
        dir_fd = open_private_dir(directory)
    except NotPrivateError as exc:
        sys.exit(f"subscription broker: {exc}")  # its stderr is nobody's; the starter logs that none answers
    logging.basicConfig(
        handlers=[PrivateLog(dir_fd, "broker.log")],  # keeps the directory's handle: the log starts over in it
        level=logging.INFO,
        format="%(asctime)s %(process)d %(levelname)s %(name)s %(message)s",
    )
    if not secret:
        log.error("no job secret on stdin: exiting")
        sys.exit(2)
    run(directory, int(watch_pid), secret)


if __name__ == "__main__":
    # Through the module's own name (not __main__), as every other process knows it: its logger, its classes.
    from . import broker

    broker.main(*sys.argv[1:3])
