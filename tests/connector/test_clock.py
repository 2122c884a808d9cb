"""``pyspark_aws_kinesis.clock``: the wall clock in milliseconds, and a monotonic reading for a time another
process stamped."""

from __future__ import annotations

import time

import pytest

from pyspark_aws_kinesis import clock
from pyspark_aws_kinesis.clock import monotonic_at, now_ms


def test_now_is_the_wall_clock_in_whole_milliseconds_never_ahead() -> None:
    before = time.time_ns() // 1_000_000
    now = now_ms()
    after = time.time_ns() // 1_000_000
    assert isinstance(now, int) and before <= now <= after


def test_a_time_in_the_past_reads_that_much_earlier_on_the_monotonic_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clock, "now_ms", lambda: 10_000)
    assert monotonic_at(7_500, clock=lambda: 100.0) == 97.5
    assert monotonic_at(10_000, clock=lambda: 100.0) == 100.0


def test_a_time_stamped_ahead_of_our_clock_reads_as_now(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another host's clock may run ahead: a wait measured from its stamp never starts in our future."""
    monkeypatch.setattr(clock, "now_ms", lambda: 10_000)
    assert monotonic_at(12_000, clock=lambda: 100.0) == 100.0
