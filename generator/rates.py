"""How many records are due by a given moment: constant rate, or KDG's periodic mode.

Who calls it: ``kinesis_generator.sender.run``'s loop asks ``due(elapsed)`` against a monotonic clock and sends the
difference, so lateness (a slow call, a GC pause) is caught up instead of accumulating, as it would with
``sleep(1 / rate)``.
"""

from __future__ import annotations

import math
from collections import deque
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

    def due_before(self, end_s: float) -> int:
        """Records due before the run ends at ``end_s``."""
        return self.due(end_s - 1e-9)

    @property
    def mean_per_s(self) -> float:
        """Records per second asked for (the summary compares the achieved rate and the stream's limit with it)."""
        return self.rate

    def describe(self) -> str:
        return f"{self.rate:g} records/s"


class PeriodicRate:
    """KDG's periodic mode: at the start of each second, a burst of N ~ Normal(mean, stddev) records (N >= 0).

    A run may last months: the bursts are drawn as the seconds come and only the last ``KEPT_SECONDS`` are kept
    (the sender asks about now and the seconds just ahead); the run's total (``due_before``) is drawn again from
    the start on a copy of the generator. So the bursts come from a generator of their own, seeded from ``rng``:
    what else draws from ``rng`` (the templates) does not change them."""

    KEPT_SECONDS = 60

    def __init__(self, mean: float, stddev: float, rng: Random | None = None):
        if not mean > 0 or stddev < 0:
            raise UsageError(
                f"--periodic needs MEAN > 0 and STDDEV >= 0 records per second, got {mean}, {stddev}", "--periodic"
            )
        self.mean, self.stddev = mean, stddev
        self._rng = Random((rng or Random()).getrandbits(64))
        self._start_state = self._rng.getstate()
        self._first = 0  # the earliest second kept
        self._before_first = 0  # records due before it
        self._cumulative: deque[int] = deque()  # records due by the end of each second from the first kept on

    def _burst(self, rng: Random) -> int:
        return max(0, round(rng.gauss(self.mean, self.stddev)))

    def _through(self, second: int) -> int:
        """Records due by the end of ``second`` (not before the earliest kept)."""
        while self._first + len(self._cumulative) <= second:
            last = self._cumulative[-1] if self._cumulative else self._before_first
            self._cumulative.append(last + self._burst(self._rng))
        while self._first < second - self.KEPT_SECONDS:
            self._before_first = self._cumulative.popleft()
            self._first += 1
        if second < self._first:
            raise ValueError(f"second {second} of the run is forgotten (the earliest kept is {self._first})")
        return self._cumulative[second - self._first]

    def due(self, elapsed_s: float) -> int:
        return self._through(int(elapsed_s)) if elapsed_s >= 0 else 0

    def next_due_s(self, sent: int) -> float:
        """The second whose burst holds record number ``sent`` (0-based), from the earliest second kept on."""
        second = self._first
        while self._through(second) <= sent:
            second += 1
        return float(second)

    def due_before(self, end_s: float) -> int:
        """Records due before the run ends at ``end_s``: the bursts drawn again from the start, none of them kept."""
        replay = Random()
        replay.setstate(self._start_state)
        return sum(self._burst(replay) for _second in range(math.ceil(end_s)))

    @property
    def mean_per_s(self) -> float:
        return self.mean

    def describe(self) -> str:
        return f"periodic, Normal({self.mean:g}, {self.stddev:g}) records each second"
