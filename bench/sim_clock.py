"""A simulated clock, so that a benchmark runs weeks of one-second triggers in an hour.

``SimClock.install()`` replaces ``time.time``, ``time.time_ns``, ``time.monotonic`` and ``time.sleep`` in the
``time`` module: every caller that looks them up when it calls (the connector does: ``time.monotonic()``) reads
the simulated clock, and a sleep moves the clock on at once instead of waiting. Install it before importing the
connector, whose few defaults bound at import (``field(default_factory=time.monotonic)``) would keep the real
clock. Modules that took the originals earlier (threading's locks and conditions) keep real time: their waits
stay real waits, short here because the stand-in answers at once.

Who calls it: ``bench.driver_soak``. Not a benchmark itself (run_all skips it).
"""

from __future__ import annotations

import threading
import time

_REAL = (time.time, time.time_ns, time.monotonic, time.sleep)


class SimClock:
    """Wall and monotonic time that move only when told (``advance``) or slept on."""

    def __init__(self) -> None:
        self._wall0, self._monotonic0 = time.time(), time.monotonic()
        self._elapsed = 0.0
        self._lock = threading.Lock()

    @property
    def elapsed_s(self) -> float:
        return self._elapsed

    def time(self) -> float:
        return self._wall0 + self._elapsed

    def time_ns(self) -> int:
        return int(self.time() * 1e9)

    def monotonic(self) -> float:
        return self._monotonic0 + self._elapsed

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._elapsed += max(0.0, seconds)

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)
        _REAL[3](0)  # let other threads run, as a real sleep would

    def install(self) -> SimClock:
        time.time, time.time_ns, time.monotonic, time.sleep = self.time, self.time_ns, self.monotonic, self.sleep
        return self

    @staticmethod
    def uninstall() -> None:
        time.time, time.time_ns, time.monotonic, time.sleep = _REAL
