"""``pyspark_aws_kinesis.fetch.polling.pacing``: ``CallPacer`` waits only what is left of the interval and counts an
answer's bytes from its call's start; ``ReadBackoff`` lengthens the interval and shrinks the limit while Kinesis
refuses calls. The clock is simulated."""

from __future__ import annotations

import pytest

from pyspark_aws_kinesis.fetch.polling.pacing import MIN_LIMIT, RECOVER_AFTER, CallPacer, ReadBackoff
from pyspark_aws_kinesis.record_sizes import SHARD_READ_BYTES_PER_S
from pyspark_aws_kinesis.retry import QUOTA_BACKOFF_MIN_S
from pyspark_aws_kinesis.shard_calls import MAX_CHARGE_LAG_S
from tests.connector.fetch.polling.polling_util import INTERVAL_S, SimulatedClock


def test_the_pacer_waits_only_what_is_left_of_the_interval() -> None:
    clock = SimulatedClock()
    pacer = CallPacer(INTERVAL_S, clock, clock.sleep)
    pacer.wait()  # the first call: nothing to wait for
    clock.now += 0.05  # that call took 50 ms
    pacer.wait()
    clock.now += 0.5  # this one took longer than the interval
    pacer.wait()
    assert clock.sleeps == [pytest.approx(0.15)]
    assert CallPacer(0.0, clock, clock.sleep).wait() is None and clock.sleeps == [pytest.approx(0.15)]


def test_an_answers_bytes_are_paid_back_from_its_calls_start_but_from_no_longer_than_a_lag_before_it() -> None:
    """Counted from the answer, each call on a busy shard also waited its own round trip (~3.8 calls a second where
    the bytes allow 4); counted from further back than ``MAX_CHARGE_LAG_S``, a slow call could put the shard in more
    debt than Kinesis tolerates (a second's budget) by the time of the next call."""
    clock = SimulatedClock()
    pacer = CallPacer(0.0, clock, clock.sleep)
    quarter = SHARD_READ_BYTES_PER_S // 4  # a quarter of a second's budget
    pacer.wait()
    clock.now += 0.1  # the call's round trip
    assert pacer.charge(quarter, pacer.last_start) == pytest.approx(0.15)  # paid back 250 ms after the start
    pacer.wait()
    assert clock.sleeps == [pytest.approx(0.15)]
    clock.now += 2.0  # a slow call: counted from MAX_CHARGE_LAG_S before its answer, not from its start
    assert pacer.charge(2 * quarter, pacer.last_start) == pytest.approx(0.5 - MAX_CHARGE_LAG_S)
    assert pacer.charge(quarter) == pytest.approx(0.25 + 0.5 - MAX_CHARGE_LAG_S)  # no start: from the answer


def test_a_refusal_lengthens_the_interval_and_shrinks_the_limit_until_calls_get_through() -> None:
    backoff = ReadBackoff(0.2, 10000)
    backoff.refused()
    assert (backoff.interval_s, backoff.limit) == (QUOTA_BACKOFF_MIN_S, 5000)  # never asked again at once
    backoff.refused()
    assert (backoff.interval_s, backoff.limit) == (2 * QUOTA_BACKOFF_MIN_S, 2500)
    for _ in range(RECOVER_AFTER - 1):
        backoff.got_through()
    assert (backoff.interval_s, backoff.limit) == (2 * QUOTA_BACKOFF_MIN_S, 2500)  # not at the first call through
    for _ in range(4 * RECOVER_AFTER + 1):
        backoff.got_through()
    assert (backoff.interval_s, backoff.limit) == (0.2, 10000)  # back to the settings, step by step
    unpaced = ReadBackoff(0.0, 150)
    unpaced.refused()
    assert unpaced.interval_s == QUOTA_BACKOFF_MIN_S and unpaced.limit == MIN_LIMIT  # fetchIntervalMs=0 waits too
