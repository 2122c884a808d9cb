"""A loopback HTTP proxy in front of a Kinesis (or DynamoDB, or S3) endpoint that injects the faults no emulator
produces.

Point a client at ``proxy.endpoint_url`` instead of the server's. For each request whose action is selected
(``Faults.actions``, default all), the proxy may add latency, drop the connection without an answer, answer
with a throttling error, answer with a 5xx, for GetRecords answer that the iterator expired, or, for
PutRecords, fail a share of the entries; for S3, answer conditional PUTs with a 409 conflict. Failed entries
are really not written (they are removed from the request before it is forwarded), so a client that
retries exactly the failed entries ends with every record stored once. Dropped requests are dropped before
they reach the server, for the same reason. Change ``proxy.faults`` at any time; ``proxy.stats`` counts
what was injected, ``proxy.calls`` every request by action (a recording of what a client called).
"""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from localaws.servers import LOOPBACK

AMZ_JSON = "application/x-amz-json-1.1"
# Data-plane calls are throttled per shard; control-plane calls per account.
SHARD_THROTTLE = "ProvisionedThroughputExceededException"
ACCOUNT_THROTTLE = "LimitExceededException"
SHARD_LEVEL_ACTIONS = frozenset({"GetRecords", "PutRecord", "PutRecords", "SubscribeToShard"})
HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "host"})


@dataclass(frozen=True)
class Faults:
    """Probabilities (0 to 1) of each fault per selected request, plus a fixed added latency."""

    throttle_rate: float = 0.0
    server_error_rate: float = 0.0
    latency_s: float = 0.0
    drop_rate: float = 0.0
    put_records_entry_failure_rate: float = 0.0
    expired_iterator_rate: float = 0.0
    # S3 (any other HTTP method than POST): a conditional PutObject (If-None-Match) answered 409
    # ConditionalRequestConflict, as S3 does while a concurrent conditional write of the key is in flight.
    s3_conditional_conflict_rate: float = 0.0
    actions: frozenset[str] | None = None

    def applies_to(self, action: str) -> bool:
        return self.actions is None or action in self.actions


class FaultProxy:
    """``with FaultProxy(server.endpoint_url, Faults(throttle_rate=0.3)) as proxy: use proxy.endpoint_url``."""

    def __init__(self, upstream_url: str, faults: Faults = Faults(), seed: int = 0):
        upstream = urlsplit(upstream_url)
        self.upstream_host = upstream.hostname or LOOPBACK
        self.upstream_port = upstream.port or 80
        self.faults = faults
        self.stats: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()  # every request by action (X-Amz-Target), injected faults included
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint_url(self) -> str:
        assert self._server is not None, "proxy not started"
        return f"http://{LOOPBACK}:{self._server.server_address[1]}"

    def start(self) -> FaultProxy:
        self._server = ThreadingHTTPServer((LOOPBACK, 0), _handler_class(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True)
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

    def count(self, kind: str, amount: int = 1, counter: Counter[str] | None = None) -> None:
        with self._lock:
            (self.stats if counter is None else counter)[kind] += amount


def _handler_class(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(_FaultHandler):
        pass

    Handler.proxy = proxy
    return Handler


class _FaultHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    proxy: FaultProxy

    def log_message(self, format: str, *args) -> None:  # keep test output quiet
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        action = self.headers.get("X-Amz-Target", "").rpartition(".")[2]
        self.proxy.count(action, counter=self.proxy.calls)
        faults = self.proxy.faults
        if not faults.applies_to(action):
            self._forward(body)
            return
        if faults.latency_s:
            self.proxy.count("delayed")
            time.sleep(faults.latency_s)
        if self.proxy.chance(faults.drop_rate):
            self.proxy.count("dropped")
            self.close_connection = True  # no answer at all: the client sees the connection close
            return
        if self.proxy.chance(faults.throttle_rate):
            self.proxy.count("throttled")
            code = SHARD_THROTTLE if action in SHARD_LEVEL_ACTIONS else ACCOUNT_THROTTLE
            self._answer(400, {"__type": code, "message": "Rate exceeded (injected by FaultProxy)"})
            return
        if self.proxy.chance(faults.server_error_rate):
            self.proxy.count("server_error")
            status, code = (500, "InternalFailure") if self.proxy.chance(0.5) else (503, "ServiceUnavailable")
            self._answer(status, {"__type": code, "message": "injected by FaultProxy"})
            return
        if action == "GetRecords" and self.proxy.chance(faults.expired_iterator_rate):
            self.proxy.count("expired_iterator")
            message = "Iterator expired (injected by FaultProxy)"
            self._answer(400, {"__type": "ExpiredIteratorException", "message": message})
            return
        if action == "PutRecords" and faults.put_records_entry_failure_rate > 0:
            self._put_records_with_failures(body, faults.put_records_entry_failure_rate)
            return
        self._forward(body)

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        conditional = self.headers.get("If-None-Match") is not None
        if conditional and self.proxy.chance(self.proxy.faults.s3_conditional_conflict_rate):
            self.proxy.count("conditional_conflict")
            error = (
                "<?xml version='1.0' encoding='UTF-8'?><Error><Code>ConditionalRequestConflict</Code><Message>A "
                "conflicting operation occurred (injected by FaultProxy)</Message></Error>"
            )
            self._reply(409, [("Content-Type", "application/xml")], error.encode())
            return
        self._forward(body)

    def do_GET(self) -> None:
        self._forward(b"")

    def do_HEAD(self) -> None:
        self._forward(b"")

    def do_DELETE(self) -> None:
        self._forward(self.rfile.read(int(self.headers.get("Content-Length", 0))))

    def _put_records_with_failures(self, body: bytes, rate: float) -> None:
        request = json.loads(body)
        entries = request["Records"]
        failed = {i for i in range(len(entries)) if self.proxy.chance(rate)}
        kept = [entry for i, entry in enumerate(entries) if i not in failed]
        self.proxy.count("failed_entries", len(failed))
        upstream_results: list[dict] = []
        upstream_failures = 0
        if kept:
            status, headers, payload = self._send_upstream(json.dumps({**request, "Records": kept}).encode())
            if status != 200:
                self._reply(status, headers, payload)
                return
            answer = json.loads(payload)
            upstream_results = answer["Records"]
            upstream_failures = answer.get("FailedRecordCount", 0)
        results = iter(upstream_results)
        merged = [
            {"ErrorCode": SHARD_THROTTLE, "ErrorMessage": "Rate exceeded for shard (injected by FaultProxy)"}
            if i in failed
            else next(results)
            for i in range(len(entries))
        ]
        self._answer(200, {"FailedRecordCount": upstream_failures + len(failed), "Records": merged})

    def _send_upstream(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        connection = self._open_upstream(body)
        response = connection.getresponse()
        payload = response.read()
        connection.close()
        return response.status, response.getheaders(), payload

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
        connection.close()

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
