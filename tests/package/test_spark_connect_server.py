"""docs/spark-connect.md, as a user runs it: a standalone Spark Connect server whose Python has the wheel, and a
thin client whose Python has pyspark and no connector. The client reads a stream in batch and streaming over
``sc://`` and copies it through the sink into another stream; the test reads that stream back with boto3.

The server starts the way the docs say: ``sbin/start-connect-server.sh --wait`` where the Spark distribution
has it (pyspark 4.3's pip package does; EMR's Spark does), else the ``spark-submit --class`` line that script
runs (pyspark 4.0.2's pip package ships the server's jar but not the script).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from infra import packaging
from localaws import LocalServer
from localaws.servers import free_port

from .venvs import (
    VENVS,
    borrowing_venv,
    clean_env,
    filled_stream_options,
    fresh_venv,
    project_python,
    pyspark_home,
    run,
)

CLIENT_APP = Path(__file__).with_name("connect_client_app.py")
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return packaging.build_wheel(tmp_path_factory.mktemp("dist"))


def server_command(spark_home: Path, port: int) -> list:
    """The documented start line: the script in the foreground, or what the script runs."""
    confs = [
        "--master", "local[2]",
        "--conf", f"spark.connect.grpc.binding.port={port}",
        "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf", "spark.ui.enabled=false",
    ]  # fmt: skip
    script = spark_home / "sbin" / "start-connect-server.sh"
    if script.exists():
        return [script, "--wait", *confs]
    return [spark_home / "bin" / "spark-submit", "--class", SERVER_CLASS, "--name", "Spark Connect server", *confs]


def wait_for_port(port: int, server: subprocess.Popen, log: Path, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"the Spark Connect server exited with {server.returncode}:\n{log.read_text()[-4000:]}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    pytest.fail(f"the Spark Connect server did not listen on {port} in {timeout_s} s:\n{log.read_text()[-4000:]}")


def stop_group(server: subprocess.Popen) -> None:
    """Stop the server's whole process group: the script's shell, the JVM it starts and the JVM's Python workers
    (a SIGTERM to the script alone leaves the JVM serving)."""
    for sig, wait_s in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, sig)
        try:
            server.wait(timeout=wait_s)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGKILL)  # what outlived the shell
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.mark.slow
@pytest.mark.parametrize("which", list(VENVS))
def test_a_thin_client_reads_and_writes_through_a_standalone_connect_server(
    which: str, wheel: Path, kinesalite: LocalServer, lite_stream, tmp_path: Path
) -> None:
    base = project_python(which)
    work = tmp_path / "work"
    work.mkdir()
    server_python = fresh_venv(base, tmp_path / "server-venv", wheel)
    client_python = borrowing_venv(base, tmp_path / "client-venv")

    source, sink = lite_stream(shards=2), lite_stream(shards=1)
    produced = [f"connect-{which}-{i}" for i in range(10)]
    options = filled_stream_options(kinesalite, source, produced, work)

    port = free_port()
    log = tmp_path / "connect-server.log"
    server_env = clean_env(
        PYSPARK_PYTHON=str(server_python),  # the server's Python workers: where the connector is installed
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(tmp_path / "spark-logs"),
        SPARK_PID_DIR=str(tmp_path),
    )
    with log.open("w") as out:
        server = subprocess.Popen(
            [str(part) for part in server_command(pyspark_home(server_python, work), port)],
            cwd=work, env=server_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        wait_for_port(port, server, log)
        app = shutil.copy(CLIENT_APP, work / "client_app.py")
        arguments = [f"sc://127.0.0.1:{port}", json.dumps(options), sink, work]
        out = run([client_python, app, *arguments], work, timeout=420)
    finally:
        stop_group(server)
    (line,) = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    result = json.loads(line.removeprefix("RESULT "))
    assert result["client_has_connector"] is False, "the client must not need the connector"
    assert result["batch"] == sorted(produced)
    assert result["stream"] == sorted(produced)
    assert sorted(read_all(kinesalite.client("kinesis"), sink)) == sorted(produced)


def read_all(kinesis, stream: str) -> list[str]:
    """Every record of every shard of ``stream``, from the oldest."""
    records = []
    for shard in kinesis.list_shards(StreamName=stream)["Shards"]:
        iterator = kinesis.get_shard_iterator(
            StreamName=stream, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            page = kinesis.get_records(ShardIterator=iterator, Limit=1000)
            records += [record["Data"].decode() for record in page["Records"]]
            iterator = page.get("NextShardIterator") if page["MillisBehindLatest"] > 0 or page["Records"] else None
    return records
