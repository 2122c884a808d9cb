"""How many records are due by a given moment: constant rate, or KDG's periodic mode.

Who calls it: ``kinesis_generator.sender.run``'s loop asks ``due(elapsed)`` against a monotonic clock and sends the
difference, so lateness (a slow call, a GC pause) is caught up instead of accumulating, as it would with
``sleep(1 / rate)``.
"""

from __future__ import annotations

import math
from random import Random

from kinesis_generator.errors import UsageError


class ConstantRate:
    """``rate`` records per second, evenly spread: record n is due at n / rate seconds."""

    def __init__(self, rate: float):
        if not rate > 0 or math.isinf(rate):
            raise UsageError(f"--rate must be a positive number of records per second, got {rate}", "--rate")
        self.rate = rate

    def due(self, elapsed_s: float) -> int:
        """Records that should have been sent ``elapsed_s`` seconds after the start."""
        return int(elapsed_s * self.rate) + 1 if elapsed_s >= 0 else 0

    def next_due_s(self, sent: int) -> float:
        """Seconds after the start when record number ``sent`` (0-based) is due."""
        return sent / self.rate

    @property
    def mean_per_s(self) -> float:
        """Records per second asked for (the summary compares the achieved rate and the stream's limit with it)."""
        return self.rate

    def describe(self) -> str:
        return f"{self.rate:g} records/s"


class PeriodicRate:
    """KDG's periodic mode: at the start of each second, a burst of N ~ Normal(mean, stddev) records (N >= 0)."""

    def __init__(self, mean: float, stddev: float, rng: Random | None = None):
        if not mean > 0 or stddev < 0:
            raise UsageError(
                f"--periodic needs MEAN > 0 and STDDEV >= 0 records per second, got {mean}, {stddev}", "--periodic"
            )
        self.mean, self.stddev = mean, stddev
        self._rng = rng or Random()
        self._cumulative: list[int] = []  # records due by the end of second i

    def _through(self, second: int) -> int:
        while len(self._cumulative) <= second:
            burst = max(0, round(self._rng.gauss(self.mean, self.stddev)))
            self._cumulative.append((self._cumulative[-1] if self._cumulative else 0) + burst)
        return self._cumulative[second]

    def due(self, elapsed_s: float) -> int:
        return self._through(int(elapsed_s)) if elapsed_s >= 0 else 0

    def next_due_s(self, sent: int) -> float:
        second = 0
        while self._through(second) <= sent:
            second += 1
        return float(second)

    @property
    def mean_per_s(self) -> float:
        return self.mean

    def describe(self) -> str:
        return f"periodic, Normal({self.mean:g}, {self.stddev:g}) records each second"
