"""The driver benchmark's simulated clock: every reader of the time module sees it, a sleep moves it at once."""

from __future__ import annotations

import subprocess
import sys

from localaws.servers import project_root

# Run in a fresh interpreter: in a test worker, other threads (the in-process proxies, pytest-timeout) sleep too,
# and a sleep of theirs while the clock is installed would move it on.
CHECK = """
import time
from bench.sim_clock import SimClock

clock = SimClock().install()
try:
    wall, monotonic, began = time.time(), time.monotonic(), time.perf_counter()
    time.sleep(3600)
    clock.advance(0.5)
    # The clock's bases differ (epoch seconds, seconds since boot), so the sums round apart: compare to 1 us.
    assert abs(time.time() - wall - 3600.5) < 1e-6, time.time() - wall
    assert abs(time.monotonic() - monotonic - 3600.5) < 1e-6, time.monotonic() - monotonic
    assert abs(time.time_ns() / 1e9 - time.time()) < 1e-3
    assert time.perf_counter() - began < 1.0  # perf_counter stays real: the benchmark times with it
finally:
    SimClock.uninstall()
assert abs(time.time() - wall) < 60, time.time() - wall
print("ok")
"""


def test_sleeping_moves_the_clock_without_waiting_and_uninstall_restores_real_time() -> None:
    run = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, cwd=project_root())
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]
