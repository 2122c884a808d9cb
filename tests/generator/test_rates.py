"""Schedules: how many records are due when, for the constant and the periodic (KDG) modes."""

from __future__ import annotations

from random import Random

import pytest

from kinesis_generator.rates import ConstantRate, PeriodicRate
from kinesis_generator.sender import _limit


def test_constant_rate_spreads_records_evenly():
    rate = ConstantRate(200)
    assert [rate.due(t) for t in (0, 0.0049, 0.005, 0.5, 1.0)] == [1, 1, 2, 101, 201]
    assert rate.next_due_s(100) == pytest.approx(0.5)
    assert _limit(rate, duration_s=3.0, count=None) == 600
    assert _limit(rate, duration_s=3.0, count=50) == 50


def test_periodic_rate_bursts_once_per_second():
    rate = PeriodicRate(mean=50, stddev=0)
    assert [rate.due(t) for t in (0, 0.99, 1.0, 2.5)] == [50, 50, 100, 150]
    assert rate.next_due_s(50) == 1.0
    assert _limit(rate, duration_s=2.0, count=None) == 100


def test_periodic_counts_follow_the_normal_distribution():
    rate = PeriodicRate(mean=100, stddev=20, rng=Random(4))
    bursts = [rate.due(s) - rate.due(s - 1) if s else rate.due(0) for s in range(400)]
    mean = sum(bursts) / len(bursts)
    spread = (sum((b - mean) ** 2 for b in bursts) / len(bursts)) ** 0.5
    assert 95 < mean < 105 and 16 < spread < 24


def test_a_periodic_run_of_days_keeps_a_minute_of_bursts_and_its_total_matches_them():
    """A soak load of days: the sender asks about each second in turn (and the next burst's second when idle);
    what it keeps stays a minute, and the run's total, drawn again from the start, is what the seconds added up
    to, whatever the templates drew from the shared generator meanwhile."""
    shared = Random(7)
    rate = PeriodicRate(mean=100, stddev=30, rng=shared)
    seconds = 2 * 24 * 3600
    total = rate.due_before(seconds)
    for second in range(seconds):
        due = rate.due(second + 0.5)
        assert rate.next_due_s(due) > second  # the next non-empty burst
        shared.random()  # a template's draw
    assert len(rate._cumulative) <= PeriodicRate.KEPT_SECONDS + 1
    assert due == total and 0.99 * 100 * seconds < total < 1.01 * 100 * seconds
    with pytest.raises(ValueError, match="forgotten"):
        rate.due(0)


@pytest.mark.parametrize("bad", [0, -1, float("inf")])
def test_bad_rates_are_refused(bad: float):
    with pytest.raises(ValueError, match="--rate"):
        ConstantRate(bad)
    with pytest.raises(ValueError, match="--periodic"):
        PeriodicRate(bad if bad != float("inf") else 0, 1)
