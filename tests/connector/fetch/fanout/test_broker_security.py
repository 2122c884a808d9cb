"""The subscription broker trusts nothing on the host (kinesis-mock, real broker processes): a symbolic link swapped
in for its directory, a directory of another owner or mode, a peer of another uid at either end, a reply that is not
the protocol's (a pickle that would run code), a second job with its own secret: each is refused with one log
line, no request (credentials) is sent to anything but the job's own broker, and the read goes on, direct."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from localaws import LocalServer
from localaws.streams import list_shard_ids
from pyspark_aws_kinesis.fetch.decode import ShardContext
from pyspark_aws_kinesis.fetch.fanout import protocol as efo_protocol
from pyspark_aws_kinesis.fetch.fanout.client import BrokeredSubscriber, broker_pids, broker_stats
from pyspark_aws_kinesis.positions import TRIM_HORIZON, Position
from pyspark_aws_kinesis.private import NotPrivateError, open_private_dir
from tests.connector.support.efo_util import FULL_RANGE, PATIENT, active_consumer, settings
from tests.connector.support.source_util import put_numbered

SECRET = "job-a-secret"
OTHER = "job-b-secret"
NOBODY = 65534
ROOT_ONLY = pytest.mark.skipif(os.getuid() != 0, reason="needs root to act as another uid")


def _read(server: LocalServer, stream: str, count: int, secret: str = SECRET) -> tuple[list[bytes], BrokeredSubscriber]:
    """One task's read of ``stream``'s shard from TRIM_HORIZON until ``count`` records: (data, its transport)."""
    (shard,) = list_shard_ids(server.client("kinesis"), stream)
    consumer = active_consumer(server.endpoint_url, stream)
    context = ShardContext(stream, shard, *FULL_RANGE)
    transport = BrokeredSubscriber(settings(server.endpoint_url), 30.0, PATIENT, consumer.arn, "t", context, secret)
    got: list[bytes] = []
    pages = transport.pages(Position(TRIM_HORIZON))
    while len(got) < count:
        got += next(pages).data
    pages.close()
    return got, transport


def _socket(directory: str, secret: str = SECRET) -> str:
    return os.path.join(directory, efo_protocol.socket_name(efo_protocol.job_name(secret)))


def _broker_log(directory: str) -> str:
    return Path(directory, "broker.log").read_text()


def _refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "broker" in r.getMessage()]


class FakeBroker:
    """Listens at a job's socket in ``directory`` and answers every connection with ``reply`` (raw bytes); records
    what it was sent."""

    def __init__(self, path: str, reply: bytes):
        self.received = b""
        self.connections = 0
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(path)
        self.server.listen()
        self.reply = reply
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                conn.settimeout(2)
                try:
                    self.received += conn.recv(1 << 16)
                    conn.sendall(self.reply)
                    conn.recv(1)
                except OSError:
                    pass

    def close(self) -> None:
        self.server.close()


def test_a_symlink_swapped_in_for_the_directory_is_refused(
    kinesis_mock: LocalServer, mock_stream, broker: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The job's broker runs; then its directory is renamed away and a link to another user's directory, holding a
    listener at the same socket name, takes its name. The next read sends nothing there and goes on direct."""
    stream = mock_stream(shards=1)
    produced = put_numbered(kinesis_mock, stream, "a", 3)
    assert _read(kinesis_mock, stream, 3)[0] == produced
    attacker = tempfile.mkdtemp(prefix="efo-evil-")
    fake = FakeBroker(_socket(attacker), b"")
    moved = broker + "-moved"
    os.rename(broker, moved)
    os.symlink(attacker, broker)
    try:
        got, transport = _read(kinesis_mock, stream, 3)
        assert got == produced and transport.direct_reads == 1
        assert fake.connections == 0 and fake.received == b""
        (line,) = _refusals(caplog)
        assert "without the subscription broker" in line and "not a private directory" in line, line
    finally:
        fake.close()
        os.unlink(broker)
        os.rename(moved, broker)


@pytest.mark.parametrize("change", ["owner", "mode"])
def test_a_directory_of_another_owner_or_mode_is_refused(
    kinesis_mock: LocalServer, mock_stream, broker: str, caplog: pytest.LogCaptureFixture, change: str
) -> None:
    if change == "owner":
        if os.getuid() != 0:
            pytest.skip("needs root to give the directory away")
        os.chown(broker, NOBODY, -1)
    else:
        os.chmod(broker, 0o755)
    with pytest.raises(NotPrivateError, match="not private to this user"):
        os.close(open_private_dir(broker))
    stream = mock_stream(shards=1)
    produced = put_numbered(kinesis_mock, stream, "a", 2)
    got, transport = _read(kinesis_mock, stream, 2)
    assert got == produced and transport.direct_reads == 1
    (line,) = _refusals(caplog)
    assert "not private to this user" in line, line
    assert broker_pids(broker) == []  # no broker was started there


_OTHER_UID_CLIENT = """
import ctypes, os, socket, sys
from pyspark_aws_kinesis.fetch.fanout import protocol as efo_protocol
os.seteuid(int(sys.argv[3]))  # SO_PEERCRED reports this uid ...
ctypes.CDLL(None, use_errno=True).setfsuid(0)  # ... while the files stay reachable (the directory is root's 0700)
conn = socket.socket(socket.AF_UNIX)
conn.connect(sys.argv[1])
try:
    efo_protocol.send(conn, {"secret": sys.argv[2], "kind": "stats"})
    print(efo_protocol.receive(conn)[0])
except (EOFError, OSError):  # closed (before or after it read the request)
    print("closed")
"""


@ROOT_ONLY
def test_the_broker_refuses_a_peer_of_another_uid(kinesis_mock: LocalServer, mock_stream, broker: str) -> None:
    """Even with the job's secret: a process of another uid (here: euid nobody) gets nothing, and one log line."""
    stream = mock_stream(shards=1)
    put_numbered(kinesis_mock, stream, "a", 1)
    _read(kinesis_mock, stream, 1)
    command = [sys.executable, "-c", _OTHER_UID_CLIENT, _socket(broker), SECRET, str(NOBODY)]
    answer = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.strip() == "closed"
    assert "refused a connection: the peer (pid " in _broker_log(broker)
    assert f"runs as uid {NOBODY}, not {os.getuid()}" in _broker_log(broker)
    assert len(broker_stats(SECRET)) == 1  # it serves its own user still


def test_the_client_refuses_a_broker_of_another_uid(
    kinesis_mock: LocalServer, mock_stream, broker: str, caplog: pytest.LogCaptureFixture, monkeypatch
) -> None:
    """The job's broker runs as this user; a task that expects another uid (as a task would find a socket bound by
    another user) sends it no request and reads direct."""
    stream = mock_stream(shards=1)
    produced = put_numbered(kinesis_mock, stream, "a", 2)
    _read(kinesis_mock, stream, 2)
    monkeypatch.setattr(efo_protocol, "expected_peer_uid", lambda: os.getuid() + 1)
    got, transport = _read(kinesis_mock, stream, 2)
    assert got == produced and transport.direct_reads == 1
    (line,) = _refusals(caplog)
    assert f"runs as uid {os.getuid()}, not {os.getuid() + 1}" in line, line


class _Payload:
    """Unpickling this would create ``path``."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_a_malicious_reply_runs_nothing_and_the_read_goes_on(
    kinesis_mock: LocalServer, mock_stream, broker: str, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """Something at the job's socket (here: of this user) answers with a pickle that would run code, framed as the
    old protocol did: refused as not JSON, nothing created, the read goes on direct; broker_stats refuses it too."""
    import pickle

    marker = tmp_path / "pwned"
    body = pickle.dumps(("page", _Payload(str(marker))))
    fake = FakeBroker(_socket(broker), len(body).to_bytes(4, "big") + (0).to_bytes(4, "big") + body)
    try:
        stream = mock_stream(shards=1)
        produced = put_numbered(kinesis_mock, stream, "a", 2)
        got, transport = _read(kinesis_mock, stream, 2)
        assert got == produced and transport.direct_reads == 1
        (line,) = _refusals(caplog)
        assert "refused the subscription broker's reply" in line and "not JSON" in line, line
        with pytest.raises(efo_protocol.ProtocolError):
            broker_stats(SECRET)
        assert not marker.exists()
    finally:
        fake.close()


def test_a_second_job_gets_its_own_broker_and_none_of_the_first_ones_pages(
    kinesis_mock: LocalServer, mock_stream, broker: str
) -> None:
    """Two jobs of one OS user (two secrets): each reads through a broker of its own; the second job's secret opens
    nothing of the first's: its request at the first broker's socket is refused with a log line."""
    stream = mock_stream(shards=1)
    produced = put_numbered(kinesis_mock, stream, "a", 3)
    got, first = _read(kinesis_mock, stream, 3, SECRET)
    assert got == produced and first.direct_reads == 0
    (shard,) = list_shard_ids(kinesis_mock.client("kinesis"), stream)
    consumer = active_consumer(kinesis_mock.endpoint_url, stream)
    context = ShardContext(stream, shard, *FULL_RANGE)
    request = efo_protocol.Request(
        settings("http://127.0.0.1:1"), 30.0, PATIENT, consumer.arn, "t", context, Position(TRIM_HORIZON)
    )
    with socket.socket(socket.AF_UNIX) as conn:
        conn.connect(_socket(broker, SECRET))
        efo_protocol.send(conn, {"secret": OTHER, "kind": "read", "request": request.to_json()})
        with pytest.raises((EOFError, ConnectionError)):  # closed, unanswered
            conn.sendall(efo_protocol.NEXT)
            efo_protocol.receive(conn)
    assert "refused a connection: a request without this job's secret" in _broker_log(broker)
    assert broker_stats(OTHER) == {}  # no broker of the second job yet
    assert len(broker_stats(SECRET)) == 1
    got, second = _read(kinesis_mock, stream, 3, OTHER)
    assert got == produced and second.direct_reads == 0
    assert len(broker_stats(OTHER)) == 1 and len(set(broker_pids(broker))) == 2


def test_requests_of_other_credentials_never_share_a_buffer() -> None:
    """No server: the broker keys its subscriptions by the credentials' identity too (keys, token, role and external
    ID), so a request with other credentials gets a subscription of its own, made with its own credentials."""
    context = ShardContext("s", "shardId-000000000000", *FULL_RANGE)

    def request(secret_key: str) -> efo_protocol.Request:
        client = settings("http://127.0.0.1:1")
        client = type(client)(**{**client.__dict__, "secret_key": secret_key})
        return efo_protocol.Request(client, 30.0, PATIENT, "arn", "t", context, Position(TRIM_HORIZON))

    assert request("a").key != request("b").key
    assert request("a").key == request("a").key
