"""A loopback HTTP proxy in front of a Kinesis (or DynamoDB, or S3) endpoint that injects the faults no emulator
produces.

Point a client at ``proxy.endpoint_url`` instead of the server's. For each request whose action is selected
(``Faults.actions``, default all), the proxy may add latency, drop the connection without an answer, answer
with a throttling error, answer with a 5xx or a chosen error code (``Faults.errors``), for GetRecords answer that
the iterator expired, or, for PutRecords, fail a share of the entries; for S3, answer conditional PUTs with a 409
conflict; conditional PUTs of one key go one at a time (S3 lets one win; moto alone could let both).
SubscribeToShard event streams can be ended after a number of events (``Faults.end_event_stream_after``: AWS
ends every subscription after ~5 minutes), given the ``initial-response`` event AWS sends first and
kinesis-mock omits (``Faults.initial_response``), and, for shards the test knows are closed (``Faults.shard_ends``),
ended as AWS ends a closed shard's subscription, which kinesis-mock never does. Failed entries are really not
written (they are removed from the request before it is forwarded), so a client that retries exactly the failed
entries ends with every record stored once. Dropped requests are dropped before they reach the server, for the
same reason. Change ``proxy.faults`` at any time; ``proxy.stats`` counts what was injected, ``proxy.calls``
every request by action (X-Amz-Target).

Retention (``proxy.trim(stream, shard_id, first_kept)``): no local server trims records past the stream's
retention, so the proxy does it for them. Records of the shard before the sequence number ``first_kept`` count
as trimmed: a GetShardIterator or SubscribeToShard at or after a trimmed sequence number is answered
``InvalidArgumentException`` about the ``StartingSequenceNumber`` (as the connector's docs say AWS answers a
trimmed position), and ``TRIM_HORIZON`` starts at ``first_kept`` (the oldest record left), in both calls.
AT_TIMESTAMP and LATEST pass unchanged. ``proxy.expire_shard(stream, shard_id)``: ListShards no longer shows
the shard (a closed shard leaves the listing once its records passed the retention). A trim stands for days
passing: from then on GetRecords takes only iterators the proxy handed out after the trim (any other is
answered ``ExpiredIteratorException``, as every iterator is after 5 minutes); those calls skip the other faults.

With ``record=True`` it also keeps, for every request, the action and who signed it for which region and
service (``proxy.signed``, from the SigV4 ``Authorization`` header): tests prove with it which credentials a
client really used. Query-protocol services (STS) name the action in the form body instead of a header.

``serving_cpu_s()``: CPU seconds every proxy of this process spent serving requests, so that a benchmark that runs
one in its own process can leave it out of its client's CPU, as it leaves out the servers the proxy stands in front
of (docs/benchmarks.md).
"""

from __future__ import annotations

import http.client
import json
import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from localaws.event_stream import encode_event, event_messages, shard_end_event
from localaws.servers import LOOPBACK

__all__ = ["FaultProxy", "Faults", "SignedRequest", "encode_event", "serving_cpu_s", "signed_request"]

AMZ_JSON = "application/x-amz-json-1.1"
KINESIS_TARGET = "Kinesis_20131202."  # X-Amz-Target of a Kinesis call: this, then the action
# Data-plane calls are throttled per shard; control-plane calls per account.
SHARD_THROTTLE = "ProvisionedThroughputExceededException"
ACCOUNT_THROTTLE = "LimitExceededException"
SHARD_LEVEL_ACTIONS = frozenset({"GetRecords", "PutRecord", "PutRecords", "SubscribeToShard"})
# (status, headers, payload) for the client, and the server's own PutRecords answer.
Upstream = tuple[int, list[tuple[str, str]], bytes, dict | None]
HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "host"})

_serving_cpu = [0.0]  # CPU seconds spent in proxies' request handlers in this process (``serving_cpu_s``)
_serving_cpu_lock = threading.Lock()


def serving_cpu_s() -> float:
    """CPU seconds the proxies of this process have spent serving requests so far: each request's thread time,
    from reading its first line to its answer's end (an event stream's relay counts when it ends)."""
    with _serving_cpu_lock:
        return _serving_cpu[0]


# Authorization: AWS4-HMAC-SHA256 Credential=<key id>/<date>/<region>/<service>/aws4_request, SignedHeaders=...
_CREDENTIAL = re.compile(r"Credential=([^/\s]+)/\d{8}/([^/]+)/([^/]+)/aws4_request")


@dataclass(frozen=True)
class SignedRequest:
    """One request as the proxy saw it: the action, and the access key id, region and service of its signature."""

    action: str
    access_key_id: str | None
    region: str | None
    service: str | None
    form: tuple[tuple[str, str], ...] = ()  # a query-protocol request's parameters (STS), else empty


def signed_request(headers, body: bytes) -> SignedRequest:
    """What ``headers`` and ``body`` say about a request's action and signature."""
    action = headers.get("X-Amz-Target", "").rpartition(".")[2]
    form: tuple[tuple[str, str], ...] = ()
    if not action and headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded"):
        form = tuple((key, values[0]) for key, values in parse_qs(body.decode("utf-8", "replace")).items())
        action = dict(form).get("Action", "")
    match = _CREDENTIAL.search(headers.get("Authorization", ""))
    key_id, region, service = match.groups() if match else (None, None, None)
    return SignedRequest(action, key_id, region, service, form)


def _stream_name(request: dict) -> str:
    """The stream a GetShardIterator (name or ARN) or SubscribeToShard (consumer ARN) request names."""
    if "StreamName" in request:
        return request["StreamName"]
    arn = request.get("StreamARN") or request.get("ConsumerARN", "")
    return arn.split(":stream/", 1)[-1].split("/", 1)[0]


@dataclass(frozen=True)
class Faults:
    """Probabilities (0 to 1) of each fault per selected request, plus a fixed added latency."""

    throttle_rate: float = 0.0
    server_error_rate: float = 0.0
    latency_s: float = 0.0
    drop_rate: float = 0.0
    # Forwarded, then the connection closes before the answer: the call took effect and the client cannot know.
    lost_answer_rate: float = 0.0
    put_records_entry_failure_rate: float = 0.0
    expired_iterator_rate: float = 0.0
    # S3 (any other HTTP method than POST): a conditional PutObject (If-None-Match) answered 409
    # ConditionalRequestConflict, as S3 does while a concurrent conditional write of the key is in flight.
    s3_conditional_conflict_rate: float = 0.0
    actions: frozenset[str] | None = None
    # (error code, probability) pairs: answer HTTP 400 with that code, e.g. ("ResourceInUseException", 0.5).
    errors: tuple[tuple[str, float], ...] = ()
    # SubscribeToShard: end the event stream cleanly after this many events (None: never).
    end_event_stream_after: int | None = None
    # SubscribeToShard: send an initial-response event before the server's events, as AWS does.
    initial_response: bool = False
    # SubscribeToShard to these (closed) shard ids: the first event with no records and MillisBehindLatest 0 loses
    # its ContinuationSequenceNumber and ends the stream, as AWS ends a closed shard's subscription (AWS also lists
    # the ChildShards there; nothing here reads them: children come from ListShards).
    shard_ends: frozenset[str] = frozenset()
    # At most this many faults in all (None: no bound), e.g. 1 to fail only the first selected call.
    max_faults: int | None = None

    def applies_to(self, action: str) -> bool:
        return self.actions is None or action in self.actions


class ProxyServer(ThreadingHTTPServer):
    """One thread per client connection. A listen backlog of 128, not socketserver's 5: a Spark query opens
    dozens of connections at once, and a refused SYN costs the client a 1 s retransmit."""

    request_queue_size = 128
    daemon_threads = True


class FaultProxy:
    """``with FaultProxy(server.endpoint_url, Faults(throttle_rate=0.3)) as proxy: use proxy.endpoint_url``."""

    thread_name = "fault-proxy"

    def __init__(self, upstream_url: str, faults: Faults = Faults(), seed: int = 0, record: bool = False):
        upstream = urlsplit(upstream_url)
        self.record = record
        self.signed: list[SignedRequest] = []
        self.upstream_host = upstream.hostname or LOOPBACK
        self.upstream_port = upstream.port or 80
        self.faults = faults
        self.stats: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()  # every request by action (X-Amz-Target), injected faults included
        self._rng = random.Random(seed)
        self._injected = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.trimmed: dict[tuple[str, str], int] = {}  # (stream, shard id) -> first sequence number kept
        self.fresh_iterators: set[str] = set()  # handed out since the first trim: the only ones not expired
        self.expired_shards: set[tuple[str, str]] = set()  # (stream, shard id) ListShards leaves out
        self._key_locks: dict[str, threading.Lock] = {}  # S3 path -> held while a conditional PutObject of it runs

    def conditional_put_lock(self, path: str) -> threading.Lock:
        """The lock conditional PutObjects of ``path`` take one at a time: moto checks ``If-None-Match`` and then
        writes with no lock between, so two racing puts could both win there, which S3 never allows."""
        with self._lock:
            return self._key_locks.setdefault(path, threading.Lock())

    def trim(self, stream: str, shard_id: str, first_kept: str) -> None:
        """From now on, the records of ``shard_id`` before sequence number ``first_kept`` are trimmed (see the
        module doc); ``first_kept`` must be a record's sequence number (TRIM_HORIZON starts there)."""
        with self._lock:
            self.trimmed[(stream, shard_id)] = int(first_kept)

    def expire_shard(self, stream: str, shard_id: str) -> None:
        """From now on ListShards answers leave out ``shard_id`` of ``stream`` (see the module doc)."""
        with self._lock:
            self.expired_shards.add((stream, shard_id))

    def is_fresh(self, iterator: str) -> bool:
        """Whether the proxy handed ``iterator`` out since the first trim (others count as expired)."""
        with self._lock:
            return iterator in self.fresh_iterators

    def handed_out(self, iterator: str) -> None:
        with self._lock:
            self.fresh_iterators.add(iterator)

    def expired_in(self, stream: str) -> set[str]:
        """The shard ids of ``stream`` that ListShards leaves out."""
        with self._lock:
            return {shard for name, shard in self.expired_shards if name == stream}

    def retention_answer(self, action: str, body: bytes) -> tuple[bytes, dict | None]:
        """``body`` for the server (TRIM_HORIZON moved to the first record kept), or an error document to answer
        instead (a position that was trimmed)."""
        if action not in ("GetShardIterator", "SubscribeToShard") or not self.trimmed:
            return body, None
        request = json.loads(body)
        stream = _stream_name(request)
        with self._lock:
            first_kept = self.trimmed.get((stream, request.get("ShardId", "")))
        if first_kept is None:
            return body, None
        position = request.get("StartingPosition", request)  # SubscribeToShard nests it
        kind = position.get("Type", position.get("ShardIteratorType"))
        sequence = position.get("SequenceNumber", position.get("StartingSequenceNumber"))
        if kind in ("AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER") and int(sequence) < first_kept:
            self.count("trimmed_positions")
            message = (
                f"StartingSequenceNumber {sequence} used in {action} on shard {request['ShardId']} in stream "
                f"{stream} under account 000000000000 is invalid because it is before the trim horizon "
                "(trimmed past the retention period, by the retention proxy)"
            )
            return body, {"__type": "InvalidArgumentException", "message": message}
        if kind == "TRIM_HORIZON":
            self.count("moved_trim_horizons")
            if "StartingPosition" in request:
                request["StartingPosition"] = {"Type": "AT_SEQUENCE_NUMBER", "SequenceNumber": str(first_kept)}
            else:
                request.update(ShardIteratorType="AT_SEQUENCE_NUMBER", StartingSequenceNumber=str(first_kept))
            return json.dumps(request).encode(), None
        return body, None

    @property
    def endpoint_url(self) -> str:
        assert self._server is not None, "proxy not started"
        return f"http://{LOOPBACK}:{self._server.server_address[1]}"

    def start(self) -> FaultProxy:
        self._server = ProxyServer((LOOPBACK, 0), self.handler_class())
        self._thread = threading.Thread(target=self._server.serve_forever, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def chance(self, probability: float) -> bool:
        with self._lock:
            return probability > 0 and self._rng.random() < probability

    def inject(self, probability: float) -> bool:
        """Whether to inject a fault of this probability now (within ``faults.max_faults``)."""
        with self._lock:
            bound = self.faults.max_faults
            if bound is not None and self._injected >= bound:
                return False
        if not self.chance(probability):
            return False
        with self._lock:
            self._injected += 1
        return True

    def count(self, kind: str, amount: int = 1) -> None:
        with self._lock:
            self.stats[kind] += amount

    def count_call(self, action: str) -> None:
        with self._lock:
            self.calls[action] += 1

    def note(self, request: SignedRequest) -> None:
        if self.record:
            with self._lock:
                self.signed.append(request)

    def requests(self, action: str | None = None) -> list[SignedRequest]:
        """The recorded requests so far (of ``action`` only, if given)."""
        with self._lock:
            return [request for request in self.signed if action is None or request.action == action]

    def handler_class(self) -> type[BaseHTTPRequestHandler]:
        """The request handler class bound to this proxy (a subclass of a proxy names its own handler)."""
        return type("Handler", (FaultHandler,), {"proxy": self})


class FaultHandler(BaseHTTPRequestHandler):
    """Handles one client connection of a ``FaultProxy``: its faults, and the forwarding machinery (upstream
    requests, answers, event-stream relays) that ``localaws.quota_proxy`` builds on."""

    protocol_version = "HTTP/1.1"
    proxy: FaultProxy

    def log_message(self, format: str, *args) -> None:  # keep test output quiet
        pass

    def handle(self) -> None:
        """Serve the connection; a client that hangs up mid-answer, or an upstream that cuts its answer mid-chunk,
        ends it quietly (socketserver would print a traceback for each): the client sees its answer cut as it was
        cut, and the upstream connection is closed by the ``finally`` of whoever opened it."""
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError, TimeoutError, http.client.IncompleteRead):
            self.close_connection = True

    def handle_one_request(self) -> None:
        started = time.thread_time()  # each connection has a thread of its own: its time is this request's
        try:
            super().handle_one_request()
        finally:
            spent = time.thread_time() - started
            with _serving_cpu_lock:
                _serving_cpu[0] += spent

    def read_body(self) -> bytes | None:
        """The request body, or None when the client hung up before sending all of it (nothing is forwarded:
        half a request must never reach the server)."""
        expected = int(self.headers.get("Content-Length", 0))
        body = self.rfile.read(expected)
        if len(body) < expected:
            self.close_connection = True
            return None
        return body

    def do_POST(self) -> None:
        body = self.read_body()
        if body is None:
            return
        request = signed_request(self.headers, body)
        self.proxy.note(request)
        action = request.action
        self.proxy.count_call(action)
        if action == "ListShards" and self.proxy.expired_shards:
            self._list_without_expired(body)
            return
        if self.proxy.trimmed and action in ("GetShardIterator", "GetRecords", "SubscribeToShard"):
            body, answered = self._retention(action, body)
            if answered:
                return
        faults = self.proxy.faults
        if not faults.applies_to(action):
            self._forward(body)
            return
        if faults.latency_s:
            self.proxy.count("delayed")
            time.sleep(faults.latency_s)
        if self.proxy.inject(faults.drop_rate):
            self.proxy.count("dropped")
            self.close_connection = True  # no answer at all: the client sees the connection close
            return
        if self.proxy.inject(faults.lost_answer_rate):
            self.proxy.count("answer_lost")
            self._send_upstream(body)
            self.close_connection = True
            return
        if self.proxy.inject(faults.throttle_rate):
            self.proxy.count("throttled")
            code = SHARD_THROTTLE if action in SHARD_LEVEL_ACTIONS else ACCOUNT_THROTTLE
            self._answer(400, {"__type": code, "message": "Rate exceeded (injected by FaultProxy)"})
            return
        if self.proxy.inject(faults.server_error_rate):
            self.proxy.count("server_error")
            status, code = (500, "InternalFailure") if self.proxy.chance(0.5) else (503, "ServiceUnavailable")
            self._answer(status, {"__type": code, "message": "injected by FaultProxy"})
            return
        for code, rate in faults.errors:
            if self.proxy.inject(rate):
                self.proxy.count(code)
                self._answer(400, {"__type": code, "message": "injected by FaultProxy"})
                return
        if action == "SubscribeToShard" and (
            faults.end_event_stream_after is not None or faults.initial_response or faults.shard_ends
        ):
            self._forward_event_stream(body, faults)
            return
        if action == "GetRecords" and self.proxy.inject(faults.expired_iterator_rate):
            self.proxy.count("expired_iterator")
            message = "Iterator expired (injected by FaultProxy)"
            self._answer(400, {"__type": "ExpiredIteratorException", "message": message})
            return
        if action == "PutRecords" and faults.put_records_entry_failure_rate > 0:
            self._put_records_with_failures(body, faults.put_records_entry_failure_rate)
            return
        self._forward(body)

    def _list_without_expired(self, body: bytes) -> None:
        """A ListShards answer without the shards ``expire_shard`` named (for the stream the request names)."""
        stream = _stream_name(json.loads(body))
        status, headers, payload = self._send_upstream(body)
        if status == 200:
            answer = json.loads(payload)
            gone = self.proxy.expired_in(stream)
            answer["Shards"] = [shard for shard in answer.get("Shards", []) if shard["ShardId"] not in gone]
            payload = json.dumps(answer).encode()
        self._reply(status, headers, payload)

    def _retention(self, action: str, body: bytes) -> tuple[bytes, bool]:
        """After a trim (module doc): refuse trimmed positions and expired iterators, move TRIM_HORIZON, note the
        iterators handed out. Returns the body to go on with (SubscribeToShard) and whether it was answered."""
        proxy = self.proxy
        if action == "GetRecords":
            if not proxy.is_fresh(json.loads(body).get("ShardIterator", "")):
                proxy.count("expired_iterator")
                message = "Iterator expired (issued before the retention proxy's trim)"
                self._answer(400, {"__type": "ExpiredIteratorException", "message": message})
                return body, True
        else:
            body, refusal = proxy.retention_answer(action, body)
            if refusal is not None:
                self._answer(400, refusal)
                return body, True
            if action == "SubscribeToShard":
                return body, False
        status, headers, payload = self._send_upstream(body)
        if status == 200:
            answer = json.loads(payload)
            iterator = answer.get("NextShardIterator" if action == "GetRecords" else "ShardIterator")
            if iterator:
                proxy.handed_out(iterator)
        self._reply(status, headers, payload)
        return body, True

    def do_PUT(self) -> None:
        body = self.read_body()
        if body is None:
            return
        if self.headers.get("If-None-Match") is None:
            self._forward(body)
            return
        if self.proxy.chance(self.proxy.faults.s3_conditional_conflict_rate):
            self._conditional_conflict("conditional_conflict", "injected by FaultProxy")
            return
        with self.proxy.conditional_put_lock(urlsplit(self.path).path):
            self._forward(body)

    def _conditional_conflict(self, stat: str, why: str) -> None:
        self.proxy.count(stat)
        error = (
            "<?xml version='1.0' encoding='UTF-8'?><Error><Code>ConditionalRequestConflict</Code><Message>A "
            f"conflicting operation occurred ({why})</Message></Error>"
        )
        self._reply(409, [("Content-Type", "application/xml")], error.encode())

    def do_GET(self) -> None:
        self._forward(b"")

    def do_HEAD(self) -> None:
        self._forward(b"")

    def do_DELETE(self) -> None:
        body = self.read_body()
        if body is not None:
            self._forward(body)

    def _put_records_with_failures(self, body: bytes, rate: float) -> None:
        request = json.loads(body)
        failure = {"ErrorCode": SHARD_THROTTLE, "ErrorMessage": "Rate exceeded for shard (injected by FaultProxy)"}
        failed = {i: failure for i in range(len(request["Records"])) if self.proxy.chance(rate)}
        self.proxy.count("failed_entries", len(failed))
        status, headers, payload, _ = self.put_records_without(body, request, failed)
        self._reply(status, headers, payload)

    def put_records_without(self, body: bytes, request: dict, failed: dict[int, dict]) -> Upstream:
        """Forward a PutRecords ``request`` without its entries ``failed`` (index -> the result to answer for that
        entry), so that they are really not written. Returns the answer for the client (the results merged in
        order, FailedRecordCount counting both) and, last, the server's own answer (None if nothing was forwarded
        or the server failed the call, whose answer is then the client's)."""
        entries = request["Records"]
        kept = [entry for i, entry in enumerate(entries) if i not in failed]
        answer: dict | None = None
        if kept:
            forwarded = body if not failed else json.dumps({**request, "Records": kept}).encode()
            status, headers, payload = self._send_upstream(forwarded)
            if status != 200:
                return status, headers, payload, None
            answer = json.loads(payload)
        results = iter(answer["Records"] if answer else [])
        merged = [failed[i] if i in failed else next(results) for i in range(len(entries))]
        upstream_failures = answer.get("FailedRecordCount", 0) if answer else 0
        document = {"FailedRecordCount": upstream_failures + len(failed), "Records": merged}
        return 200, [("Content-Type", AMZ_JSON)], json.dumps(document).encode(), answer

    def _send_upstream(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        connection = self._open_upstream(body)
        try:
            response = connection.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            connection.close()

    def _open_upstream(self, body: bytes) -> http.client.HTTPConnection:
        connection = http.client.HTTPConnection(self.proxy.upstream_host, self.proxy.upstream_port, timeout=120)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP | {"content-length"}}
        headers["Content-Length"] = str(len(body))
        connection.request(self.command, self.path, body=body, headers=headers)
        return connection

    def _forward(self, body: bytes) -> None:
        """Pass the request through and stream the answer back as it arrives (SubscribeToShard streams)."""
        self.proxy.count("forwarded")
        connection = self._open_upstream(body)
        try:
            response = connection.getresponse()
            self.send_response(response.status)
            for key, value in response.getheaders():
                if key.lower() not in HOP_BY_HOP:
                    self.send_header(key, value)
            streamed = response.getheader("Content-Length") is None
            if streamed:
                self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            while chunk := response.read1(65536):
                if streamed:
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                else:
                    self.wfile.write(chunk)
                self.wfile.flush()
            if streamed:
                self.wfile.write(b"0\r\n\r\n")
        finally:  # also when the client hung up mid-answer: the server's side of the relay ends too
            connection.close()

    def _forward_event_stream(self, body: bytes, faults: Faults) -> None:
        """Relay a SubscribeToShard answer message by message: maybe an initial response first, maybe an end
        after ``faults.end_event_stream_after`` events (the client sees the stream end, as after AWS's 5 minutes)."""
        self.proxy.count("forwarded")
        connection = self._open_upstream(body)
        try:
            response = connection.getresponse()
            if response.status != 200:
                self._reply(response.status, response.getheaders(), response.read())
                return
            self.start_event_stream(response)
            if faults.initial_response:
                self._write_chunk(encode_event({":message-type": "event", ":event-type": "initial-response"}, b"{}"))
            closed = json.loads(body).get("ShardId") in faults.shard_ends
            self._relay_events(response, faults.end_event_stream_after, closed)
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):  # the client closed its stream: so do we, upstream
            self.close_connection = True
        finally:
            connection.close()

    def _relay_events(self, response: http.client.HTTPResponse, limit: int | None, closed: bool = False) -> None:
        if limit == 0:
            self.proxy.count("ended_event_streams")
            return
        for sent, message in enumerate(event_messages(response), start=1):
            end = shard_end_event(message) if closed else None
            self._write_chunk(end or message)
            if end is not None:
                self.proxy.count("shard_ends")
                return
            if limit is not None and sent >= limit:
                self.proxy.count("ended_event_streams")
                return

    def start_event_stream(self, response: http.client.HTTPResponse) -> None:
        """Send the status line and headers of a SubscribeToShard answer whose events follow as chunks."""
        self.send_response(200)
        for key, value in response.getheaders():
            if key.lower() not in HOP_BY_HOP | {"content-length"}:
                self.send_header(key, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _answer(self, status: int, document: dict) -> None:
        self._reply(status, [("Content-Type", AMZ_JSON)], json.dumps(document).encode())

    def _reply(self, status: int, headers: list[tuple[str, str]], payload: bytes) -> None:
        self.send_response(status)
        for key, value in headers:
            if key.lower() not in HOP_BY_HOP | {"content-length"}:
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
