"""``pyspark_aws_kinesis.aws.clients``, the one place that builds AWS clients: what they send whatever botocore version
is installed (the pyspark 4.0.2 venv runs these with the lowest botocore we support), and a User-Agent header built
once per client that still says what botocore would.

The User-Agent test runs against kinesalite: the headers a client sends are recorded (botocore's ``before-send``
event, after signing), and botocore's User-Agent builder is counted. A plain botocore client is the reference."""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import secrets
import socketserver
import threading
import tracemalloc
import types
from typing import Any

import pytest
from botocore.exceptions import ConnectionClosedError
from botocore.httpsession import URLLib3Session
from botocore.useragent import UserAgentString

from localaws import LocalServer
from localaws.servers import DUMMY_SECRET_KEY
from localaws.streams import put_records
from pyspark_aws_kinesis.aws.clients import (
    RAW_BODY,
    _new_client,
    kinesis_client,
    kinesis_reader_client,
    send_timestamps_to_the_millisecond,
)
from pyspark_aws_kinesis.aws.settings import ClientSettings
from pyspark_aws_kinesis.fetch.fanout.subscriber import starting_position, subscription_client
from pyspark_aws_kinesis.fetch.iterators import iterator_request
from pyspark_aws_kinesis.positions import AT_TIMESTAMP, Position
from pyspark_aws_kinesis.retry import is_retryable, outcome_unknown

# 2026-11-26T12:34:56.789Z: the milliseconds are what a whole-second Timestamp loses
AT_MS = 1795696496789


def _sent_body(kinesis: Any, operation: str, params: dict[str, Any]) -> dict[str, Any]:
    """The JSON body ``kinesis`` would send for ``operation``, as serialized for the wire (nothing is sent)."""
    model = kinesis.meta.service_model.operation_model(operation)
    return json.loads(kinesis._serializer.serialize_to_request(params, model)["body"])


@pytest.mark.parametrize("make", [kinesis_client, kinesis_reader_client], ids=["client", "reader"])
def test_get_shard_iterator_sends_at_timestamp_to_the_millisecond(make: Any) -> None:
    kinesis = make(ClientSettings("us-east-1", "http://127.0.0.1:9", "AKIDCLIENTSTEST", "secret"))
    params = {"StreamName": "s", "ShardId": "shardId-000000000000"}
    params.update(iterator_request(Position(AT_TIMESTAMP, timestamp_ms=AT_MS)))
    assert _sent_body(kinesis, "GetShardIterator", params)["Timestamp"] == AT_MS / 1000


def test_subscribe_to_shard_sends_at_timestamp_to_the_millisecond() -> None:
    kinesis = subscription_client(ClientSettings("us-east-1", "http://127.0.0.1:9", "AKIDCLIENTSTEST", "secret"), 5.0)
    params = {
        "ConsumerARN": "arn:aws:kinesis:us-east-1:123456789012:stream/s/consumer/c:1",
        "ShardId": "shardId-000000000000",
        "StartingPosition": starting_position(Position(AT_TIMESTAMP, timestamp_ms=AT_MS)),
    }
    assert _sent_body(kinesis, "SubscribeToShard", params)["StartingPosition"]["Timestamp"] == AT_MS / 1000


@pytest.mark.parametrize("depth", [0, 1, 2], ids=["no-serializer", "no-converter", "validated-no-converter"])
def test_a_botocore_without_the_internals_keeps_its_own_converter(depth: int) -> None:
    innermost = types.SimpleNamespace()
    client = innermost
    for _ in range(depth):
        client = types.SimpleNamespace(_serializer=client)
    send_timestamps_to_the_millisecond(client)  # must not fail the client's creation, nor add a converter
    assert not hasattr(innermost, "_timestamp_unixtimestamp")


CALLS = 4
# botocore's request contexts (which carry a call's features) are what the kept strings are keyed on.
KEYED_BY_CONTEXT = importlib.util.find_spec("botocore.context") is not None


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every User-Agent string botocore builds from now on (for clients created from now on)."""
    built: list[str] = []
    original = UserAgentString.to_string

    def counted(self: UserAgentString) -> str:
        built.append(original(self))
        return built[-1]

    monkeypatch.setattr(UserAgentString, "to_string", counted)
    return built


def _fresh_settings(server: LocalServer) -> ClientSettings:
    """Settings no earlier test used, so the process's client cache makes a new client (after the patch)."""
    return ClientSettings("us-east-1", server.endpoint_url, f"AKID{secrets.token_hex(6).upper()}", DUMMY_SECRET_KEY)


def _sent_headers(kinesis: Any) -> list[dict[str, bytes]]:
    sent: list[dict[str, bytes]] = []
    kinesis.meta.events.register("before-send.kinesis", lambda request, **_: sent.append(dict(request.headers)))
    return sent


def _agent(headers: dict[str, bytes]) -> list[str]:
    """The User-Agent's parts, the features of its ``m/`` part sorted (botocore joins a set: any order)."""
    parts = headers["User-Agent"].decode().split(" ")
    return [f"m/{','.join(sorted(part[2:].split(',')))}" if part.startswith("m/") else part for part in parts]


def _probe(kinesis: Any, stream: str) -> None:
    iterator = kinesis.get_shard_iterator(
        StreamName=stream, ShardId="shardId-000000000000", ShardIteratorType="LATEST"
    )["ShardIterator"]
    for _ in range(CALLS):  # an idle shard's probes (the same iterator: nothing is consumed)
        kinesis.get_records(ShardIterator=iterator, Limit=1)


@pytest.mark.parametrize("make", [kinesis_client, kinesis_reader_client], ids=["client", "reader"])
def test_the_user_agent_is_built_once_per_client_and_unchanged(
    make: Any, kinesalite: LocalServer, lite_stream, builds: list[str]
) -> None:
    stream = lite_stream(shards=1)
    builds.clear()  # creating the stream built some
    reference = _new_client("kinesis", _fresh_settings(kinesalite))  # as botocore builds it: per call
    reference_sent = _sent_headers(reference)
    _probe(reference, stream)
    # botocore builds it per call: when serializing and again before sending (1.35.16, the lowest we support: once)
    assert len(builds) >= CALLS + 1
    botocores_own = len(builds)
    builds.clear()

    settings = _fresh_settings(kinesalite)
    ours = make(settings)
    ours_sent = _sent_headers(ours)
    _probe(ours, stream)
    if KEYED_BY_CONTEXT:
        assert len(builds) <= 2  # once per feature set (GetShardIterator and GetRecords may differ), not per call
    elif make is kinesis_client:  # a botocore without request contexts: nothing to key on, botocore's own way
        assert len(builds) == botocores_own
    else:  # ... but the reader's GetRecords (aws.direct_get_records) builds it once per stream
        assert len(builds) < botocores_own
    assert [_agent(h) for h in ours_sent] == [_agent(h) for h in reference_sent]
    for headers in ours_sent:  # still signed, by the client's own key
        assert f"Credential={settings.access_key_id}/".encode() in headers["Authorization"]


def test_clients_of_a_process_share_one_session_and_its_models() -> None:
    """A second client reads no service model again (~0.08 CPU s a client on a new session; a query start makes
    two or three): its loader is the first one's, which keeps what it loaded."""
    first = _new_client("kinesis", ClientSettings("us-east-1", "http://127.0.0.1:1", access_key_id="a", secret_key="b"))
    other = _new_client("kinesis", ClientSettings("eu-west-1", "http://127.0.0.1:2", access_key_id="c", secret_key="d"))
    assert other._loader is first._loader
    assert other._request_signer._credentials.access_key == "c"  # each its own keys


def _peak_of(call: Any) -> tuple[Any, int]:
    """What ``call()`` returns and the peak of Python's allocations while it ran, above those before."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before, _ = tracemalloc.get_traced_memory()
        result = call()
        return result, tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def test_the_reader_reads_an_answer_whole_holding_its_body_once(kinesalite: LocalServer, lite_stream) -> None:
    """botocore reads a body in 64 KiB pieces and joins them: twice the body at the join. The reader's client
    reads it in one read: a 10 MiB record's answer (13 MiB) is held once, not twice."""
    stream = lite_stream(shards=1)
    setup = kinesalite.client("kinesis")
    put_records(setup, stream, [(os.urandom(1000 * 1024), f"k{i}") for i in range(4)])
    shard = "shardId-000000000000"
    iterator = setup.get_shard_iterator(StreamName=stream, ShardId=shard, ShardIteratorType="TRIM_HORIZON")

    def get_records(reader: Any) -> bytes:
        return reader.get_records(ShardIterator=iterator["ShardIterator"], Limit=10)[RAW_BODY]

    ours_reader, botocores = (kinesis_reader_client(_fresh_settings(kinesalite)) for _ in range(2))
    del botocores._endpoint.http_session.send  # botocore's own way back
    for reader in (ours_reader, botocores):
        get_records(reader)  # first-call imports and caches, unmeasured
    ours, ours_peak = _peak_of(lambda: get_records(ours_reader))
    theirs, theirs_peak = _peak_of(lambda: get_records(botocores))
    records = json.loads(ours)["Records"]
    assert records == json.loads(theirs)["Records"] and len(records) == 4  # the iterators they hand on differ
    assert ours_peak < 1.4 * len(ours) and theirs_peak > 1.8 * len(ours), (len(ours), ours_peak, theirs_peak)


# Whether botocore asks urllib3 not to enforce Content-Length (newer ones do; EMR's 1.35 does not).
BOTOCORE_TAKES_SHORT_BODIES = "enforce_content_length=False" in inspect.getsource(URLLib3Session.send)


class _CutAnswer(socketserver.BaseRequestHandler):
    """Answers any request 200 with a Content-Length of 1,000 bytes, sends half of them and hangs up."""

    def handle(self) -> None:
        received = b""
        while b"\r\n\r\n" not in received:
            received += self.request.recv(65536)
        head, _, body = received.partition(b"\r\n\r\n")
        lines = head.lower().split(b"\r\n")
        length = next(int(line.split(b":")[1]) for line in lines if line.startswith(b"content-length"))
        while len(body) < length:
            body += self.request.recv(65536)
        answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.1\r\nContent-Length: 1000\r\n\r\n"
        self.request.sendall(answer + b'{"Records": [' + b" " * 487)


def test_an_answer_cut_short_is_a_retryable_closed_connection_not_a_short_body() -> None:
    """A newer botocore's pieces take a body cut short for the whole of it (it asks urllib3 to enforce no
    Content-Length), and the decode then fails on broken JSON, which no retry helps; EMR's botocore 1.35 raised
    ConnectionClosedError. Read whole, it is a connection closed mid-answer, on either."""
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), _CutAnswer) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            settings = ClientSettings("us-east-1", f"http://127.0.0.1:{server.server_address[1]}", "AKIDCUT", "s")
            reader = kinesis_reader_client(settings)
            with pytest.raises(ConnectionClosedError) as cut:
                reader.get_records(ShardIterator="AAAA", Limit=1)
            assert is_retryable(cut.value) and outcome_unknown(cut.value)
            del reader._endpoint.http_session.send  # botocore's own way
            try:
                taken = len(reader.get_records(ShardIterator="AAAA", Limit=1)[RAW_BODY])
            except ConnectionClosedError:
                taken = None
            assert taken == (500 if BOTOCORE_TAKES_SHORT_BODIES else None)
        finally:
            server.shutdown()
