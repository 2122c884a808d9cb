"""Start, probe and stop the local AWS servers.

Each server runs as a child process in its own process group, bound to 127.0.0.1 on a free port, with its
output in a log file. On Linux the child also gets ``PR_SET_PDEATHSIG`` so that it dies with the Python
process that started it, even when that process is killed with SIGKILL and no cleanup code runs.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import boto3
from botocore.config import Config

DUMMY_ACCESS_KEY = "testing"
DUMMY_SECRET_KEY = "testing"
DEFAULT_REGION = "us-east-1"
LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 60.0


def project_root() -> Path:
    return Path(__file__).resolve().parent.parent


def node_package(name: str) -> Path:
    path = project_root() / "node_modules" / name
    if not path.is_dir():
        raise RuntimeError(
            f"node package {name!r} is not installed under {path.parent}; run `make setup` (npm ci) first"
        )
    return path


@dataclass(frozen=True)
class ServerSpec:
    """How to launch one kind of server on a given port, and how to tell that it answers."""

    name: str
    command: Callable[[int], list[str]]
    env: Callable[[int], dict[str, str]] = lambda port: {}
    probe_service: str = "kinesis"
    stop_grace_s: float = 5.0  # between SIGTERM and SIGKILL

    def probe(self, endpoint_url: str) -> None:
        client = aws_client(
            self.probe_service,
            endpoint_url,
            config=Config(connect_timeout=1, read_timeout=2, retries={"max_attempts": 0}),
        )
        if self.probe_service == "kinesis":
            client.list_streams(Limit=1)
        else:
            client.get_caller_identity()


def _kinesis_mock_command(port: int) -> list[str]:
    wall_clock = Path(__file__).with_name("wall_clock.js")  # its time of day from the wall clock (the file says why)
    return ["node", "--require", str(wall_clock), str(node_package("kinesis-local") / "main.js")]


def _kinesis_mock_env(port: int) -> dict[str, str]:
    # kinesis-mock binds 0.0.0.0 with no host option; we only ever connect through 127.0.0.1.
    return {
        "KINESIS_MOCK_PLAIN_PORT": str(port),
        "KINESIS_MOCK_TLS_PORT": str(free_port()),
        "KINESIS_MOCK_CERT_PATH": str(node_package("kinesis-local") / "server.json"),
        "SHOULD_PERSIST_DATA": "false",
        "CREATE_STREAM_DURATION": "100ms",
        "DELETE_STREAM_DURATION": "100ms",
        "REGISTER_STREAM_CONSUMER_DURATION": "100ms",
        "DEREGISTER_STREAM_CONSUMER_DURATION": "100ms",
        # kinesis-mock 0.6.2 keeps a deregistered consumer DELETING for START_STREAM_ENCRYPTION_DURATION (500 ms
        # by default; measured), not for DEREGISTER_STREAM_CONSUMER_DURATION.
        "MERGE_SHARDS_DURATION": "100ms",
        "SPLIT_SHARD_DURATION": "100ms",
        "UPDATE_SHARD_COUNT_DURATION": "100ms",
        "SHARD_LIMIT": "1000",
        "LOG_LEVEL": "WARN",
    }


def _kinesalite_command(port: int) -> list[str]:
    node_package("kinesalite")
    return ["node", str(Path(__file__).with_name("kinesalite_loopback.js")), str(port)]


def _moto_command(port: int) -> list[str]:
    return [sys.executable, "-m", "moto.server", "-H", LOOPBACK, "-p", str(port)]


# kinesis-mock takes its time to end on SIGTERM and keeps nothing worth a clean end (no persistence).
KINESIS_MOCK = ServerSpec("kinesis-mock", _kinesis_mock_command, _kinesis_mock_env, stop_grace_s=0.5)
KINESALITE = ServerSpec("kinesalite", _kinesalite_command)
MOTO = ServerSpec("moto", _moto_command, probe_service="sts")
ALL_SERVERS = (KINESIS_MOCK, KINESALITE, MOTO)
# kinesalite taking records up to 10 MiB on every stream (kinesalite_loopback.js): large records answered at
# AWS's pace (kinesis-mock takes 1.4 s to answer 5 MiB). Put through its own endpoint: the quota proxy asks the
# stream's maximum, which kinesalite does not know. Its requests stay under 7 MiB: 5 MiB of data a call.
KINESALITE_LARGE = replace(KINESALITE, env=lambda port: {"LOCALAWS_MAX_RECORD_BYTES": str(10 * 1024 * 1024)})
KINESALITE_MAX_CALL_BYTES = 5 * 1024 * 1024


def kinesis_mock_taking(**durations: str) -> ServerSpec:
    """A kinesis-mock whose state changes take ``durations`` (``REGISTER_STREAM_CONSUMER_DURATION="15s"``), for a
    test that must see a state the shared servers leave within a second, however loaded the machine."""
    return replace(KINESIS_MOCK, env=lambda port: {**_kinesis_mock_env(port), **durations})


def aws_client(service: str, endpoint_url: str, region: str = DEFAULT_REGION, config: Config | None = None):
    """A boto3 client for a local server, with dummy credentials (never the caller's real ones)."""
    keys = {"aws_access_key_id": DUMMY_ACCESS_KEY, "aws_secret_access_key": DUMMY_SECRET_KEY}
    with _session_lock:  # a boto3 session makes one client at a time
        return _shared_session().client(service, region_name=region, endpoint_url=endpoint_url, config=config, **keys)


_session_lock = threading.Lock()


@functools.cache
def _shared_session() -> boto3.session.Session:
    """The process's session: it reads a service's model once. A client of a new session costs 95 ms of CPU, of this
    one 8 ms, and a test run makes thousands. Each client still has its own event hooks."""
    return boto3.session.Session()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    """Runs in the child between fork and exec: ask the kernel to SIGKILL us when our parent dies."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    except OSError:  # not Linux: the atexit and fixture cleanup still apply
        pass


@dataclass
class LocalServer:
    """One running server process."""

    spec: ServerSpec
    port: int
    process: subprocess.Popen
    log_path: Path
    _stopped: bool = field(default=False, repr=False)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def endpoint_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def client(self, service: str | None = None, region: str = DEFAULT_REGION, config: Config | None = None):
        return aws_client(service or self.spec.probe_service, self.endpoint_url, region, config)

    @property
    def direct(self) -> LocalServer:
        """The server itself (as ``QuotaServer.direct``): code that sets up or checks through ``direct`` works
        the same with and without a quota proxy in front."""
        return self

    @property
    def quota_proxy(self) -> None:
        """None: nothing is in front of the server itself (a ``QuotaServer`` has its proxy here)."""
        return None

    def exit_code(self) -> int | None:
        """The server's exit code if it has exited (on its own or killed), else None."""
        return None if self._stopped else self.process.poll()

    def death_report(self, lines: int = 30) -> str:
        """One message naming a server that exited by itself, its exit code and the tail of its log."""
        return (
            f"local server {self.name} (pid {self.pid}, {self.endpoint_url}) exited with code "
            f"{self.process.returncode}; the tail of its log {self.log_path}:\n{self.log_tail(lines)}"
        )

    def restart(self) -> None:
        """Replace the process by a new one of the same server on the same port, and wait until it answers.
        The new server is empty: a restart loses every stream. Whoever holds this object keeps using it."""
        self.stop()
        fresh = start_server(self.spec, self.log_path.parent, self.port)
        self.process, self.log_path, self._stopped = fresh.process, fresh.log_path, False
        self.wait_until_ready()

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def wait_until_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with code {self.process.returncode} before answering; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            try:
                self.spec.probe(self.endpoint_url)
                return
            except Exception as exc:
                last_error = exc
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(
            f"{self.name} did not answer on {self.endpoint_url} within {timeout_s:.0f} s "
            f"(last error: {last_error}); log {self.log_path}:\n{self.log_tail()}"
        )

    def stop(self, grace_s: float | None = None) -> None:
        """SIGTERM, then SIGKILL after ``grace_s`` (the spec's by default)."""
        if self._stopped:
            return
        self._stopped = True
        grace_s = self.spec.stop_grace_s if grace_s is None else grace_s
        for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, grace_s)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.process.wait(wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        # The group may hold grandchildren even after the leader is gone.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)


def start_server(spec: ServerSpec, log_dir: Path, port: int | None = None) -> LocalServer:
    """Launch one server (not yet probed) on ``port`` (default: a free one). Call from a long-lived thread:
    PDEATHSIG follows the thread."""
    port = port or free_port()
    log_path = log_dir / f"{spec.name}-{port}.log"
    for generation in range(1, 100):  # a restart on the same port keeps the dead server's log
        if not log_path.exists():
            break
        log_path = log_dir / f"{spec.name}-{port}.{generation}.log"
    log_file = open(log_path, "wb")  # noqa: SIM115 - the child owns it
    try:
        process = subprocess.Popen(
            spec.command(port),
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **spec.env(port)},
            cwd=log_dir,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    finally:
        log_file.close()
    return LocalServer(spec, port, process, log_path)
