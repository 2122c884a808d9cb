"""`make demo` in CI: the demo's short mode in its own process, its verdict, and nothing left running."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TAG = "KINESIS_DEMO_TEST_TAG"


def processes_tagged(tag: str) -> list[int]:
    """Live processes whose environment carries ``TAG=tag``: everything the demo started inherits it."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            environ = (proc / "environ").read_bytes()
            state = (proc / "stat").read_text().split()[2]
        except OSError:
            continue
        if f"{TAG}={tag}".encode() in environ.split(b"\0") and state != "Z":
            found.append(int(proc.name))
    return found


@pytest.mark.slow
def test_the_short_demo_counts_every_event_once_and_leaves_no_process_behind():
    tag = uuid.uuid4().hex
    env = {**os.environ, TAG: tag}
    # ~40 s on a quiet machine; the demo's own end comes far later, so a loaded one still reaches the verdict.
    result = subprocess.run(
        [sys.executable, "-m", "spark_app.demo", "--short", "--no-live", "--timeout-seconds", "300"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=360,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "VERDICT: PASS" in result.stdout, output[-4000:]
    assert "4 dead letters" in result.stdout
    assert "AWS's Kinesis quotas enforced at http://127.0.0.1:" in result.stdout  # the demo runs behind them
    assert "quota proxy," in result.stdout and "PutRecords" in result.stdout  # and says what they counted
    deadline = time.monotonic() + 10  # the JVM notices its parent is gone within a moment
    while (left := processes_tagged(tag)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, f"processes left behind by the demo: {left}"


def test_the_leftover_check_sees_a_tagged_process():
    tag = uuid.uuid4().hex
    child = subprocess.Popen(["sleep", "30"], env={**os.environ, TAG: tag})
    try:
        deadline = time.monotonic() + 10  # on a busy machine the child may not have exec'd yet
        while (found := processes_tagged(tag)) != [child.pid] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert found == [child.pid]
    finally:
        child.kill()
        child.wait()
    assert processes_tagged(tag) == []


def test_demo_options_short_mode_and_errors(capsys):
    from spark_app.demo import parse_args

    args = parse_args(["--short"])
    assert (args.seconds, args.rate, args.window_seconds) == (12.0, 25.0, 5)
    assert args.source_stream.startswith("demo-source-") and args.sink_stream.startswith("demo-sink-")
    assert not args.no_quotas and parse_args(["--no-quotas"]).no_quotas
    for argv, message in (
        (["--malformed", "9"], "--malformed: got '9'; allowed: a whole number from 0 to 4"),
        (["--timeout-seconds", "10"], "--timeout-seconds: got 10; allowed: 60 or more"),
        (["--rate", "0"], "--rate: got '0'; allowed: a number > 0"),
    ):
        with pytest.raises(SystemExit):
            parse_args(argv)
        assert message in capsys.readouterr().err
