"""A clock frozen at a given time, for the tests that drive the prober and the transport."""

from __future__ import annotations


class FrozenClock:
    """Stands in for the ``time`` module in the prober: ``monotonic()`` is ``now``, and sleeping moves it on."""

    def __init__(self, now: float):
        self.now = now

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
