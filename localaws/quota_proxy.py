"""A loopback proxy in front of kinesalite or kinesis-mock that refuses what AWS would refuse, with AWS's errors.

``with QuotaProxy(server.endpoint_url) as proxy: use proxy.endpoint_url``. Every Kinesis call is counted per
client (User-Agent), action, stream, shard and second (``proxy.report()``, or ``GET /__quota_stats`` on the
proxy's port for another process: ``localaws.quota_stats``). The quotas and how they are modeled are in
``localaws.quota_model`` (``Quotas``: AWS's limits by default) and docs/localaws.md. What it does per call:

- GetRecords: charged to the shard its iterator reads (learned from GetShardIterator and NextShardIterator:
  ``localaws.quota_routing``); refused with ProvisionedThroughputExceededException beyond 5 calls/s or while
  the shard has not paid back the bytes of earlier answers at 2 MiB/s. An iterator the proxy never handed out
  (obtained from the server directly) is passed through, counted under shard "?".
- GetShardIterator: 5/s per shard, same error.
- PutRecords / PutRecord: refused whole when a record is over the stream's maximum record size or the call over
  its size limit (ValidationException, InvalidArgumentException); else each entry routed to its shard (MD5 of the
  partition key or ExplicitHashKey against the open shards' ranges); entries beyond 1,000 records/s or 1 MiB/s of
  their shard (records over 1 MiB: beyond its burst reserve) are refused on their own and really not written
  (``FaultHandler.put_records_without``); FailedRecordCount counts them.
- SubscribeToShard: 1 call/s per consumer and shard (LimitExceededException), none within 5 s of a success
  (ResourceInUseException); the events relayed are paced to 2 MiB/s of records per consumer and shard.
- Control plane (``Quotas.control_plane``): LimitExceededException beyond its rate per stream or account;
  RegisterStreamConsumer also while 5 consumers registered through the proxy are CREATING.
- Anything else is forwarded untouched (and counted).

Error answers are AWS's JSON 1.1 errors (HTTP 400, ``{"__type": code, "message": ...}``). The proxy injects no
other faults: put a ``FaultProxy`` in front of it (``FaultProxy(quota_proxy.endpoint_url, faults)``) for both.
A client that hangs up mid-request is never forwarded; one that hangs up mid-answer still paid for it.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import select
import socket
import threading
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from botocore.config import Config

from localaws.event_stream import event_messages, event_records
from localaws.fault_proxy import AMZ_JSON, KINESIS_TARGET, FaultHandler, FaultProxy, Faults, signed_request
from localaws.quota_model import (
    AWS_QUOTAS,
    Clock,
    MiB,
    MonotonicClock,
    QuotaBook,
    Quotas,
    Refusal,
    ShardKey,
    consumer_parts,
    record_bytes,
    size_refusal,
    stream_of,
)
from localaws.quota_routing import CreatingConsumers, IteratorMap, ShardRouter
from localaws.quota_stats import STATS_PATH, QuotaReport, QuotaStats, parse_groups
from localaws.servers import DEFAULT_REGION, LocalServer, ServerSpec, aws_client
from localaws.streams import max_record_size_kib

UNKNOWN_SHARD = "?"
RESHARDING = frozenset({"SplitShard", "MergeShards", "UpdateShardCount", "CreateStream", "DeleteStream"})


class QuotaProxy(FaultProxy):
    """A Kinesis server behind AWS's quotas. ``quotas`` replaces AWS's limits (e.g. smaller ones in a test);
    ``clock`` replaces time.monotonic (``localaws.quota_model.ManualClock`` in tests)."""

    thread_name = "quota-proxy"

    def __init__(
        self, upstream_url: str, quotas: Quotas = AWS_QUOTAS, clock: Clock | None = None, record: bool = False
    ):
        super().__init__(upstream_url, record=record)
        self.upstream_url = upstream_url
        self.quotas = quotas
        self.clock = clock or MonotonicClock()
        self.book = QuotaBook(quotas, self.clock)
        self.quota_stats = QuotaStats(self.clock, quotas.as_dict())
        self.iterators = IteratorMap()
        self.list_tokens = IteratorMap(10_000)  # ListShards NextToken -> (stream, "")
        self.router = ShardRouter(self._upstream_client)
        self.creating = CreatingConsumers(self._upstream_client)
        self._client: Any = None
        self._client_lock = threading.Lock()

    @property
    def faults(self) -> Faults:
        return Faults()

    @faults.setter
    def faults(self, value: Faults) -> None:
        if value != Faults():
            raise ValueError(
                "QuotaProxy injects no faults: put a FaultProxy in front of it, "
                "FaultProxy(quota_proxy.endpoint_url, faults)"
            )

    def start(self) -> QuotaProxy:
        # Its client is made before the first call comes, not during it: on a loaded machine, making a botocore
        # client takes seconds, which a writer's first call would wait out (and time out on).
        self._upstream_client()
        super().start()
        return self

    def report(self, groups: dict[str, str] | None = None) -> QuotaReport:
        """What was counted so far (see ``localaws.quota_stats``), clients relabeled by ``groups`` if given."""
        return self.quota_stats.report(groups)

    def handler_class(self) -> type[BaseHTTPRequestHandler]:
        return type("Handler", (QuotaHandler,), {"proxy": self})

    def max_record_bytes(self, stream: str) -> int:
        """The stream's maximum record size as its server says now (1 MiB when it says nothing: never raised)."""
        return max_record_size_kib(self._upstream_client(), stream) * 1024

    def _upstream_client(self) -> Any:
        with self._client_lock:
            if self._client is None:
                config = Config(retries={"total_max_attempts": 3, "mode": "standard"}, read_timeout=30)
                self._client = aws_client("kinesis", self.upstream_url, config=config)
            return self._client


class _Call:
    """One Kinesis request: who sent it, the action, its parameters and its body as received."""

    def __init__(self, client: str, action: str, params: dict, body: bytes):
        self.client, self.action, self.params, self.body = client, action, params, body


class QuotaHandler(FaultHandler):
    proxy: QuotaProxy

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path != STATS_PATH:
            super().do_GET()
            return
        try:
            groups = parse_groups(parse_qs(url.query).get("group", []))
        except ValueError as error:
            self._reply(400, [("Content-Type", "text/plain")], str(error).encode())
            return
        with_calls = parse_qs(url.query).get("calls") == ["1"]
        document = self.proxy.report(groups or None).to_json(with_calls)
        self._reply(200, [("Content-Type", "application/json")], json.dumps(document).encode())

    def do_POST(self) -> None:
        body = self.read_body()
        if body is None:
            return
        target = self.headers.get("X-Amz-Target", "")
        if not target.startswith(KINESIS_TARGET):
            self._forward(body)
            return
        action = target[len(KINESIS_TARGET) :]
        self.proxy.note(signed_request(self.headers, body))
        self.proxy.count_call(action)
        try:
            params = json.loads(body or b"{}")
        except ValueError:  # the server says what is wrong with it
            self._forward(body)
            return
        call = _Call(self.headers.get("User-Agent", ""), action, params, body)
        self._handler(action)(call)

    def _handler(self, action: str) -> Callable[[_Call], None]:
        handlers: dict[str, Callable[[_Call], None]] = {
            "GetRecords": self._get_records,
            "GetShardIterator": self._get_shard_iterator,
            "PutRecord": self._put_record,
            "PutRecords": self._put_records,
            "SubscribeToShard": self._subscribe_to_shard,
            "RegisterStreamConsumer": self._register_stream_consumer,
        }
        if action in handlers:
            return handlers[action]
        if self.proxy.quotas.control_limit(action) is not None:
            return self._control_plane
        return self._other

    # --- the data plane ------------------------------------------------------------------------------------

    def _get_records(self, call: _Call) -> None:
        shard = self.proxy.iterators.shard_of(call.params.get("ShardIterator", ""))
        if shard is None:
            self._count(call, ("", UNKNOWN_SHARD), calls=1)
            self._forward(call.body)
            return
        decided_at = self.proxy.clock.now()  # logged: where the call falls in the shard's sliding second
        if self._refused(call, shard, self.proxy.book.get_records(shard, decided_at), decided_at=decided_at):
            return
        status, headers, payload = self._send_upstream(call.body)
        records = nbytes = 0
        if status == 200:
            answer = json.loads(payload)
            records, nbytes = len(answer["Records"]), sum(record_bytes(r) for r in answer["Records"])
            self.proxy.book.charge_read(shard, nbytes)
            if answer.get("NextShardIterator"):
                self.proxy.iterators.learn(answer["NextShardIterator"], shard)
        self._count(call, shard, calls=1, records=records, nbytes=nbytes, decided_at=decided_at)
        self._reply(status, headers, payload)

    def _get_shard_iterator(self, call: _Call) -> None:
        shard = (stream_of(call.params), call.params.get("ShardId", ""))
        if self._refused(call, shard, self.proxy.book.get_shard_iterator(shard)):
            return
        status, headers, payload = self._send_upstream(call.body)
        if status == 200:
            self.proxy.iterators.learn(json.loads(payload)["ShardIterator"], shard)
        self._count(call, shard, calls=1)
        self._reply(status, headers, payload)

    def _put_record(self, call: _Call) -> None:
        stream = stream_of(call.params)
        size = record_bytes(call.params)
        if self._too_large(call, stream, [size]):
            return
        shard_id = self._route(stream, call.params)
        if shard_id is None:
            self._count(call, (stream, UNKNOWN_SHARD), calls=1)
            self._forward(call.body)
            return
        shard = (stream, shard_id)
        refusal = self.proxy.book.put_entry(shard, size)
        if refusal is not None:
            self._count(call, shard, calls=1, refused=1, refused_records=1, reason=refusal.reason)
            self._refuse(refusal)
            return
        status, headers, payload = self._send_upstream(call.body)
        written = status == 200
        if written and json.loads(payload).get("ShardId") != shard_id:
            self.proxy.router.forget(stream)
        self._count(call, shard, calls=1, records=int(written), nbytes=size if written else 0)
        self._reply(status, headers, payload)

    def _put_records(self, call: _Call) -> None:
        stream, entries = stream_of(call.params), call.params.get("Records") or []
        if self._too_large(call, stream, [record_bytes(entry) for entry in entries]):
            return
        routes = [self._route(stream, entry) for entry in entries]
        if None in routes:
            self._count(call, (stream, UNKNOWN_SHARD), calls=1)
            self._forward(call.body)
            return
        failed: dict[int, dict] = {}
        refusals: dict[tuple[str, str], int] = {}  # (shard id, reason) -> entries refused
        for index, (entry, shard_id) in enumerate(zip(entries, routes, strict=True)):
            refusal = self.proxy.book.put_entry((stream, shard_id), record_bytes(entry))
            if refusal is not None:
                failed[index] = {"ErrorCode": refusal.code, "ErrorMessage": refusal.message}
                refusals[(shard_id, refusal.reason)] = refusals.get((shard_id, refusal.reason), 0) + 1
        status, headers, payload, answer = self.put_records_without(call.body, call.params, failed)
        kept = [i for i in range(len(entries)) if i not in failed]
        results = dict(zip(kept, answer["Records"], strict=True)) if answer else {}
        if any(result.get("ShardId", routes[i]) != routes[i] for i, result in results.items()):
            self.proxy.router.forget(stream)
        self._count_put_records(call, stream, entries, routes, results, refusals)
        self._reply(status, headers, payload)

    def _count_put_records(
        self,
        call: _Call,
        stream: str,
        entries: list[dict],
        routes: list[Any],
        results: dict[int, dict],
        refusals: dict[tuple[str, str], int],
    ) -> None:
        written: dict[str, list[int]] = {shard_id: [0, 0] for shard_id in routes}
        for index, result in results.items():
            if "SequenceNumber" in result:
                written[routes[index]][0] += 1
                written[routes[index]][1] += record_bytes(entries[index])
        for shard_id, (records, nbytes) in written.items():
            self._count(call, (stream, shard_id), calls=1, records=records, nbytes=nbytes)
        for (shard_id, reason), count in refusals.items():
            self._count(call, (stream, shard_id), refused_records=count, reason=reason)

    def _too_large(self, call: _Call, stream: str, sizes: list[int]) -> bool:
        """Refuse the call whole if its stream cannot take its records (``quota_model.size_refusal``). The stream's
        maximum is asked only when a record or the call is larger than every stream takes."""
        if max(sizes, default=0) <= MiB and sum(sizes) <= 5 * MiB:
            return False
        refusal = size_refusal(sizes, self.proxy.max_record_bytes(stream), call.action == "PutRecord")
        return self._refused(call, (stream, ""), refusal)

    def _route(self, stream: str, entry: dict) -> str | None:
        return self.proxy.router.shard_of(stream, entry.get("PartitionKey", ""), entry.get("ExplicitHashKey"))

    def _subscribe_to_shard(self, call: _Call) -> None:
        arn, shard_id = call.params.get("ConsumerARN", ""), call.params.get("ShardId", "")
        stream, consumer = consumer_parts(arn)
        shard = (stream, shard_id)
        if self._refused(call, shard, self.proxy.book.subscribe(arn, shard_id), consumer):
            return
        connection = self._open_upstream(call.body)
        try:
            response = connection.getresponse()
            self._count(call, shard, consumer, calls=1)
            if response.status != 200:
                self._reply(response.status, response.getheaders(), response.read())
                return
            self.proxy.book.subscribed(arn, shard_id)
            self.start_event_stream(response)
            threading.Thread(
                target=_hang_up_with, args=(self.connection, connection), name="subscriber watch", daemon=True
            ).start()
            for message in event_messages(response):
                records, nbytes = event_records(message)
                if records:
                    self.proxy.book.push(arn, shard_id, nbytes)  # waits until the consumer paid earlier events
                    self._count(call, shard, consumer, records=records, nbytes=nbytes)
                self._write_chunk(message)
            self.wfile.write(b"0\r\n\r\n")
        except (OSError, http.client.HTTPException):  # the client closed its stream (and _hang_up_with upstream)
            self.close_connection = True
        finally:
            connection.close()

    # --- the control plane ---------------------------------------------------------------------------------

    def _control_plane(self, call: _Call) -> None:
        stream = stream_of(call.params)
        if not stream and call.params.get("NextToken"):
            stream = (self.proxy.list_tokens.shard_of(call.params["NextToken"]) or ("", ""))[0]
        if self._refused(call, (stream, ""), self.proxy.book.control(call.action, stream)):
            return
        status, headers, payload = self._send_upstream(call.body)
        if status == 200 and call.action == "ListShards":
            token = json.loads(payload).get("NextToken")
            if token:
                self.proxy.list_tokens.learn(token, (stream, ""))
        self._count(call, (stream, ""), calls=1)
        self._reply(status, headers, payload)

    def _register_stream_consumer(self, call: _Call) -> None:
        stream = stream_of(call.params)
        if self._refused(call, (stream, ""), self.proxy.book.control(call.action, stream)):
            return
        with self.proxy.creating.lock:  # one registration at a time: the count must hold until it is made
            if self._refused(call, (stream, ""), self.proxy.book.creating(self.proxy.creating.count())):
                return
            status, headers, payload = self._send_upstream(call.body)
            if status == 200:
                described = json.loads(payload)["Consumer"]
                if described.get("ConsumerStatus") == "CREATING":
                    self.proxy.creating.add(described["ConsumerARN"])
        self._count(call, (stream, ""), calls=1)
        self._reply(status, headers, payload)

    def _other(self, call: _Call) -> None:
        stream = stream_of(call.params)
        self._count(call, (stream, ""), calls=1)
        self._forward(call.body)
        if call.action in RESHARDING:
            self.proxy.router.forget(stream)

    # --- answers and counts --------------------------------------------------------------------------------

    def _refused(
        self, call: _Call, shard: ShardKey, refusal: Refusal | None, consumer: str = "", **counts: Any
    ) -> bool:
        """Answer ``refusal`` (and count it), if there is one."""
        if refusal is None:
            return False
        self._count(call, shard, consumer, calls=1, refused=1, reason=refusal.reason, **counts)
        self._refuse(refusal)
        return True

    def _refuse(self, refusal: Refusal) -> None:
        """AWS's JSON 1.1 error answer."""
        headers = [("Content-Type", AMZ_JSON), ("x-amzn-RequestId", str(uuid.uuid4()))]
        self._reply(400, headers, json.dumps({"__type": refusal.code, "message": refusal.message}).encode())

    def _count(self, call: _Call, shard: ShardKey, consumer: str = "", **counts: Any) -> None:
        self.proxy.quota_stats.count(call.client, call.action, shard[0], shard[1], consumer, **counts)


def _hang_up_with(client: socket.socket, upstream: http.client.HTTPConnection) -> None:
    """Close ``upstream`` (a SubscribeToShard event stream) as soon as ``client`` hangs up. Without this the relay
    notices only when it next writes an event, and the server (kinesis-mock holds one subscription per consumer
    and shard until it notices its connection closed) only when it next writes: a subscription closed by its
    client would stay "in use" upstream for seconds, refusing the next one where AWS would not."""
    try:
        while upstream.sock is not None:
            readable, _, _ = select.select([client], [], [], 0.5)
            if readable:
                if client.recv(1, socket.MSG_PEEK):
                    return  # the client sends something (a next request): it is not hanging up
                break
        else:
            return  # the relay closed it: the stream ended
    except (OSError, ValueError):  # the client's socket is gone, or closed by the relay
        pass
    sock = upstream.sock
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


class QuotaServer:
    """A local Kinesis server seen through its quota proxy, what ``LocalAws(quotas=True)`` hands out: the same
    ``name``, ``endpoint_url`` (the proxy's) and ``client()`` as the ``LocalServer`` it wraps; ``direct`` is the
    server itself, for setup and checks that must not spend the quotas (preloading a stream, a verdict)."""

    def __init__(self, server: LocalServer, proxy: QuotaProxy):
        self.direct, self.quota_proxy = server, proxy

    @property
    def name(self) -> str:
        return self.direct.name

    @property
    def spec(self) -> ServerSpec:
        return self.direct.spec

    @property
    def endpoint_url(self) -> str:
        return self.quota_proxy.endpoint_url

    def client(self, service: str | None = None, region: str = DEFAULT_REGION, config: Config | None = None):
        return aws_client(service or "kinesis", self.endpoint_url, region, config)
