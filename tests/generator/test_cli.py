"""``python -m kinesis_generator`` in a subprocess against kinesalite: JSON summary, input errors, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY, LocalServer, project_root
from localaws.streams import read_stream


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "kinesis_generator", *args]


def env() -> dict[str, str]:
    return {**os.environ, "AWS_ACCESS_KEY_ID": DUMMY_ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": DUMMY_SECRET_KEY}


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli(*args), capture_output=True, text=True, env=env(), cwd=project_root(), timeout=60)


def test_json_summary_and_records_from_a_template_file(kinesalite: LocalServer, lite_stream, tmp_path):
    stream = lite_stream()
    template = tmp_path / "t.json"
    template.write_text('{"user": "{{name.firstName}}", "n": {{random.number(9)}}}')
    done = run_cli(
        "--stream", stream, "--endpoint-url", kinesalite.endpoint_url, "--template-file", str(template),
        "--partition-key", "{{random.arrayElement([\"a\",\"b\"])}}", "--count", "25", "--rate", "1000",
        "--json", "--quiet", "--seed", "5",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["records"], summary["failed"], summary["interrupted"]) == (25, 0, False)
    records = read_stream(kinesalite.client("kinesis"), stream)
    assert len(records) == 25 and {r["PartitionKey"] for r in records} == {"a", "b"}
    assert all(0 <= json.loads(r["Data"])["n"] <= 9 for r in records)


def test_bad_template_exits_2_with_its_position_and_sends_nothing(kinesalite: LocalServer, lite_stream):
    stream = lite_stream()
    done = run_cli("--stream", stream, "--endpoint-url", kinesalite.endpoint_url, "--count", "5",
                   "--template", "ok\n  {{date.nowish}}")  # fmt: skip
    assert done.returncode == 2
    first, helpers = done.stderr.splitlines()  # the error, then the helpers a template can call
    assert first.startswith("error: --template: ") and "line 2, column 3" in first and "{{date.nowish}}" in first
    assert "date.now" in helpers
    assert not read_stream(kinesalite.client("kinesis"), stream)


def test_a_run_needs_a_duration_or_a_count():
    done = run_cli("--stream", "s")
    assert done.returncode == 2 and "--duration" in done.stderr and "--count" in done.stderr
    assert len(done.stderr.splitlines()) == 1


def test_ctrl_c_stops_cleanly_and_prints_the_summary(kinesalite: LocalServer, lite_stream):
    stream = lite_stream()
    kinesis = kinesalite.client("kinesis")
    process = subprocess.Popen(
        cli("--stream", stream, "--endpoint-url", kinesalite.endpoint_url, "--rate", "200", "--duration", "60"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(), cwd=project_root(),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not read_stream(kinesis, stream) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(0.5)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=20)
    finally:
        process.kill()
    assert process.returncode == 130, err
    assert "Traceback" not in err
    assert out.startswith("interrupted: ")
    sent = int(out.split()[1])
    assert sent > 0 and sent == len(read_stream(kinesis, stream))  # the summary counts what was stored
    assert "sending" in err  # the progress bar was on
