"""The jobs as their users start them: `python -m spark_app.<job>` locally, `spark-submit` with the EMR zip."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from infra.packaging import build_pyfiles_zip
from spark_app import common
from tests.spark_app.conftest import CREDENTIALS

ROOT = Path(__file__).resolve().parents[2]


def _lines(process: subprocess.Popen) -> queue.Queue:
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _wait_for_line(lines: queue.Queue, text: str, timeout_s: float, seen: list[str]) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return False
        if line is None:
            return False
        seen.append(line)
        if text in line:
            return True
    return False


def test_word_count_prints_counts_on_the_console_and_stops_cleanly_on_sigterm(kinesalite, lite_stream, tmp_path):
    source = lite_stream(shards=1)
    kinesalite.client("kinesis").put_record(StreamName=source, Data=b"hello kinesis hello", PartitionKey="k")
    argv = [
        sys.executable, "-m", "spark_app.word_count",
        "--source-stream", source, "--region", "us-east-1", "--endpoint-url", kinesalite.endpoint_url,
        "--checkpoint-location", str(tmp_path / "ck"), "--trigger-seconds", "2", "--output", "console",
        *[arg for option in CREDENTIALS for arg in ("--source-option", option)],
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON")}
    process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: list[str] = []
    try:
        lines = _lines(process)
        # The console sink's table row for the word, printed by the first batch that read the record.
        assert _wait_for_line(lines, "|hello  |2    |", 120, seen), "".join(seen[-40:])
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == common.EXIT_OK, "".join(seen[-40:])
        rest = []
        while (line := lines.get(timeout=5)) is not None:
            rest.append(line)
        assert any("word_count stopped: received SIGTERM" in line for line in rest), "".join(rest[-40:])
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_job_file_runs_under_spark_submit_with_the_emr_zip(tmp_path):
    """EMR's form: `spark-submit --py-files pyfiles.zip spark_app/<job>.py`, with nothing else on the path."""
    pyfiles = build_pyfiles_zip(tmp_path)
    spark_submit = Path(sys.executable).with_name("spark-submit")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        [str(spark_submit), "--py-files", str(pyfiles), str(ROOT / "spark_app" / "country_counts.py"), "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "--checkpoint-location" in result.stdout and "--window-seconds" in result.stdout
