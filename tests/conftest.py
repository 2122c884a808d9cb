"""Session-wide fixtures: the local AWS servers, one SparkSession, and a fresh stream per test.

Servers and Spark start once per test session (Spark alone takes 5-12 s here). When a test that used the
servers fails, the tail of each server's log is attached to its report. A server that exits by itself is reported
once, by the test during which it died (or the next one), with its log, and restarted on its port, so that later
tests do not fail one after the other with connection errors.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from localaws import LocalAws, LocalServer
from localaws.quota_proxy import QuotaProxy
from localaws.streams import create_stream, unique_name
from tests import spark_classes

ROOT = Path(__file__).resolve().parent.parent

# Every Spark JVM the tests start (the session's and those of the apps run as subprocesses) compiles with C1 only,
# collects with one thread and maps the venv's archive of Spark's classes: a start then costs about 5 s of CPU
# instead of 16-18 on CI's 2 cores (docs/testing.md).
os.environ.setdefault("SPARK_SUBMIT_OPTS", spark_classes.java_options(spark_classes.venv_archive()))

# pytest keeps a test module's rewritten code only where bytecode may be written. Under PYTHONDONTWRITEBYTECODE (as
# on CI) every xdist worker rewrote all the test modules again: 7.2 CPU s to collect the suite, 3.6 s with them kept
# (docs/testing.md, "Compiled once"). This process only: Spark's Python processes keep the variable.
sys.dont_write_bytecode = False


_running: list[LocalAws] = []  # the session's servers, once started


@pytest.fixture(scope="session")
def local_aws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalAws]:
    aws = LocalAws(log_dir=tmp_path_factory.mktemp("localaws-logs"))
    with aws:
        _running.append(aws)
        yield aws
        _running.clear()
    survivors = [pid for pid in aws.pids() if _alive(pid)]
    assert not survivors, f"local server processes survived their stop: {survivors}"


@pytest.fixture(autouse=True)
def _local_servers_alive() -> Iterator[None]:
    """Fail the test during which a local server died (or the first one after), naming it, and restart it."""
    _fail_on_dead_servers("before this test")
    yield
    _fail_on_dead_servers("during this test")


def _fail_on_dead_servers(when: str) -> None:
    reports = _running[0].restart_dead() if _running else []
    if reports:
        pytest.fail(f"{when}, " + "\n".join(reports) + "\n(restarted on the same port, empty)", pytrace=False)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes; Popen.wait reaped ours, anything else would be a real survivor.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.fixture
def no_aws_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No region, profile or credentials from the machine: what a CLI says must not depend on them."""
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))


@pytest.fixture(scope="session")
def kinesis_mock(local_aws: LocalAws) -> LocalServer:
    return local_aws.kinesis_mock


@pytest.fixture(scope="session")
def kinesalite(local_aws: LocalAws) -> LocalServer:
    return local_aws.kinesalite


@pytest.fixture(scope="session")
def moto(local_aws: LocalAws) -> LocalServer:
    return local_aws.moto


@pytest.fixture(scope="session")
def quota_proxy(kinesalite: LocalServer) -> Iterator[QuotaProxy]:
    """AWS's Kinesis quotas in front of the session's kinesalite (``localaws.quota_proxy``): point a client at
    ``quota_proxy.endpoint_url``. Shared by the session: a test reads its own counts by its own stream
    (``quota_proxy.report().tally(stream=...)``) or User-Agent."""
    with QuotaProxy(kinesalite.endpoint_url) as proxy:
        yield proxy


@pytest.fixture(scope="session")
def quota_proxy_mock(kinesis_mock: LocalServer) -> Iterator[QuotaProxy]:
    """AWS's Kinesis quotas in front of the session's kinesis-mock (enhanced fan-out), as ``quota_proxy``."""
    with QuotaProxy(kinesis_mock.endpoint_url) as proxy:
        yield proxy


StreamFactory = Callable[..., str]


def _stream_factory(server: LocalServer) -> StreamFactory:
    kinesis = server.client("kinesis")

    def make(shards: int = 1, prefix: str = "test") -> str:
        return create_stream(kinesis, unique_name(prefix), shards)

    return make


@pytest.fixture
def mock_stream(kinesis_mock: LocalServer) -> StreamFactory:
    """``mock_stream(shards=2)`` creates a uniquely named, ACTIVE stream on kinesis-mock."""
    return _stream_factory(kinesis_mock)


@pytest.fixture
def lite_stream(kinesalite: LocalServer) -> StreamFactory:
    """``lite_stream(shards=4)`` creates a uniquely named, ACTIVE stream on kinesalite."""
    return _stream_factory(kinesalite)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory):
    """One local[2] SparkSession for the whole test session, with the connector registered."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # Python workers must import the project's packages; local[2] workers inherit this.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    from pyspark.sql import SparkSession

    from pyspark_aws_kinesis.worker_daemon import DAEMON_CONF

    session = (
        SparkSession.builder.master("local[2]")
        .appName("tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={tmp_path_factory.mktemp('derby')}")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .config(map=DAEMON_CONF)  # Python workers fork with the read path loaded (docs/source.md)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    _register_connector(session)
    yield session
    session.stop()


def _register_connector(session) -> None:
    try:
        import pyspark_aws_kinesis
    except ImportError:
        return
    register = getattr(pyspark_aws_kinesis, "register", None)
    if register is not None:
        register(session)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    # funcargs holds every fixture the test used, directly or through another fixture.
    aws = getattr(item, "funcargs", {}).get("local_aws")
    if report.failed and isinstance(aws, LocalAws):
        report.sections.append(("local server logs", aws.log_tails()))
