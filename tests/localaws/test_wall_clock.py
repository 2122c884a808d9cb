"""``localaws/wall_clock.js``: loaded before kinesis-mock, it makes the time of day kinesis-mock reads
(``performance.timeOrigin + performance.now()``) follow the wall clock after the wall clock steps forward, as it does
when a paused machine resumes; ``performance.now()`` stays monotonic."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import localaws.servers
from localaws.servers import node_package

SHIM = Path(localaws.servers.__file__).with_name("wall_clock.js")
STEP_MS = 60_000
# The wall clock steps forward by STEP_MS after the start; then the sums kinesis-mock would read.
STEPPED = f"""
const before = performance.now();
const real = Date.now;
Date.now = () => real() + {STEP_MS};
const sum = performance.timeOrigin + performance.now();
console.log(JSON.stringify({{behind_ms: Date.now() - sum, monotonic_ms: performance.now() - before}}));
"""


def _run(*preload: str) -> dict[str, float]:
    done = subprocess.run(["node", *preload, "-e", STEPPED], capture_output=True, text=True, timeout=30, check=True)
    return json.loads(done.stdout)


def test_the_time_of_day_follows_a_wall_clock_stepped_forward() -> None:
    shimmed = _run("--require", str(SHIM))
    assert abs(shimmed["behind_ms"]) < 50, shimmed
    assert 0 <= shimmed["monotonic_ms"] < 1000, shimmed  # performance.now() did not step


def test_without_it_the_time_of_day_stays_behind_by_the_step() -> None:
    """What the shim is for: Node's own sum keeps the wall clock of the start."""
    plain = _run()
    assert plain["behind_ms"] > STEP_MS - 1000, plain


def test_kinesis_mock_starts_with_it() -> None:
    command = localaws.servers._kinesis_mock_command(0)
    assert command[:3] == ["node", "--require", str(SHIM)]
    assert command[3] == str(node_package("kinesis-local") / "main.js")
