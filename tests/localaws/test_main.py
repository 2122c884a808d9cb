"""``python -m localaws`` as a person runs it: started as a process of its own, its printed endpoints and exports
serve boto3, and Ctrl-C or SIGTERM ends it with exit 0, its servers' processes gone and its log directory removed.
A mistake is one line and exit 2."""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import boto3
import pytest

from localaws.__main__ import READY_LINE
from localaws.streams import read_stream

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 120


class Run:
    """``python -m localaws ARGS`` started from ``cwd``, its stdout read line by line on a thread."""

    def __init__(self, args: list[str], cwd: Path):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "localaws", *args],
            cwd=cwd,
            env={**os.environ, "PYTHONPATH": str(ROOT)},  # from elsewhere: localaws is the checkout's
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:  # type: ignore[union-attr]
            self.lines.put(line)
        self.lines.put(None)

    def until_ready(self) -> str:
        """Its output up to the line that says how to stop it; fails with what it printed if it ends or takes long."""
        seen: list[str] = []
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            with contextlib.suppress(queue.Empty):
                line = self.lines.get(timeout=1)
                if line is None:
                    break
                seen.append(line)
                if line.startswith(READY_LINE):
                    return "".join(seen)
        self.process.kill()
        self.process.wait()
        pytest.fail(f"no {READY_LINE!r} line; stdout:\n{''.join(seen)}\nstderr:\n{self.process.stderr.read()}")

    def stop(self, signum: int) -> tuple[int, str, str]:
        """Send ``signum``; its exit code, and the stdout and stderr printed since ``until_ready``."""
        self.process.send_signal(signum)
        try:
            code = self.process.wait(60)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
        self.reader.join(10)
        rest = []
        while (line := self.lines.get_nowait()) is not None:
            rest.append(line)
        return code, "".join(rest), self.process.stderr.read()  # type: ignore[union-attr]


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def exports(output: str) -> dict[str, str]:
    return dict(re.findall(r"^export (\w+)=(\S+)$", output, re.MULTILINE))


@pytest.mark.parametrize(
    ("args", "stop_with", "servers"),
    [
        (["--stream", "experiment:2"], signal.SIGINT, 2),  # kinesalite behind the quotas, and moto
        (["--kinesis", "kinesis-mock", "--no-quotas", "--no-moto", "--stream", "experiment"], signal.SIGTERM, 1),
    ],
    ids=["kinesalite-quotas-moto-SIGINT", "kinesis-mock-alone-SIGTERM"],
)
def test_the_printed_endpoints_serve_and_a_signal_stops_everything(
    tmp_path: Path, args: list[str], stop_with: signal.Signals, servers: int
) -> None:
    run = Run(args, tmp_path)
    try:
        output = run.until_ready()
        env = exports(output)
        server_pids = children(run.process.pid)
        assert len(server_pids) == servers, (server_pids, output)
        log_dir = Path(re.search(r"^logs +(\S+)", output, re.MULTILINE).group(1))
        assert log_dir.is_dir()

        # boto3 with only what was printed: the endpoints come from the exports, not from arguments
        session = boto3.session.Session(
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            region_name=env["AWS_DEFAULT_REGION"],
        )
        kinesis = session.client("kinesis", endpoint_url=env["AWS_ENDPOINT_URL_KINESIS"])
        kinesis.put_record(StreamName="experiment", Data=b"hello", PartitionKey="k")
        assert [record["Data"] for record in read_stream(kinesis, "experiment")] == [b"hello"]
        if "AWS_ENDPOINT_URL" in env:
            s3 = session.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"])
            s3.create_bucket(Bucket="experiment-bucket")
            assert [bucket["Name"] for bucket in s3.list_buckets()["Buckets"]] == ["experiment-bucket"]
    finally:
        code, stdout, stderr = run.stop(stop_with)
    assert code == 0, stderr
    assert stdout.startswith("stopped"), stdout
    assert not [pid for pid in server_pids if alive(pid)]
    assert not log_dir.exists()


def test_the_exports_point_an_sdk_without_endpoint_arguments_at_the_servers(tmp_path: Path) -> None:
    run = Run(["--no-quotas", "--stream", "from-env"], tmp_path)
    try:
        env = exports(run.until_ready())
        probe = (
            "import boto3; k = boto3.client('kinesis'); "
            "print(k.describe_stream_summary(StreamName='from-env')['StreamDescriptionSummary']['OpenShardCount']); "
            "print(boto3.client('sts').get_caller_identity()['Account'])"
        )
        clean = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
        ran = subprocess.run(
            [sys.executable, "-c", probe], env={**clean, **env}, capture_output=True, text=True, timeout=60
        )
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.split()[0] == "1"  # kinesis from AWS_ENDPOINT_URL_KINESIS
        assert ran.stdout.split()[1].isdigit()  # moto's STS from AWS_ENDPOINT_URL
    finally:
        code, _, stderr = run.stop(signal.SIGINT)
    assert code == 0, stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--kinesis", "dynamo"], "--kinesis: invalid choice"),
        (["--stream", "two words"], "--stream 'two words'"),
        (["--log-dir", "{file}"], "File exists"),
    ],
)
def test_a_mistake_is_one_line_and_exit_2(tmp_path: Path, args: list[str], says: str) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    ran = subprocess.run(
        [sys.executable, "-m", "localaws", *[arg.format(file=a_file) for arg in args]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 2, (ran.stdout, ran.stderr)
    assert len(ran.stderr.splitlines()) == 1 and ran.stderr.startswith("error: ") and says in ran.stderr, ran.stderr
    assert a_file.read_text() == "not a directory"
