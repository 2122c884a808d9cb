"""The driver benchmark's simulated clock: every reader of the time module sees it, a sleep moves it at once."""

from __future__ import annotations

import time

from bench.sim_clock import SimClock


def test_sleeping_moves_the_clock_without_waiting_and_uninstall_restores_real_time() -> None:
    clock = SimClock().install()
    try:
        wall, monotonic, began = time.time(), time.monotonic(), time.perf_counter()
        time.sleep(3600)
        clock.advance(0.5)
        assert time.time() - wall == time.monotonic() - monotonic == 3600.5
        assert abs(time.time_ns() / 1e9 - time.time()) < 1e-3
        assert time.perf_counter() - began < 1.0  # perf_counter stays real: the benchmark times with it
    finally:
        SimClock.uninstall()
    assert abs(time.time() - wall) < 60
