"""How often the query calls a shard (connector/shard_calls.py): its share of AWS's 5 GetRecords a second, and the
least gap between two of its calls that keeps the share in every sliding second."""

from __future__ import annotations

import math

import pytest

from pyspark_aws_kinesis import shard_calls
from pyspark_aws_kinesis.record_sizes import SHARD_READ_BYTES_PER_S
from pyspark_aws_kinesis.shard_calls import MAX_CHARGE_LAG_S, min_call_gap_s, paid_back_at, query_calls_per_s


def test_the_defaults_match_the_docs() -> None:
    """docs/source.md: 4 of a shard's 5 calls a second shared, 5 alone at a probe interval of 200 ms or less,
    counted over a second and 10 ms."""
    assert (shard_calls.SHARED_CALLS_PER_S, shard_calls.ALONE_CALLS_PER_S) == (4, 5)
    assert shard_calls.ALONE_PROBE_INTERVAL_S == 0.2
    assert shard_calls.RATE_WINDOW_S == 1.01


@pytest.mark.parametrize(("probe_interval_s", "calls"), [(1.0, 4), (0.5, 4), (0.201, 4), (0.2, 5), (0.1, None)])
def test_the_calls_a_second_follow_the_probe_interval(probe_interval_s: float, calls: int | None) -> None:
    assert query_calls_per_s(probe_interval_s) == calls


@pytest.mark.parametrize("calls_per_s", [4, 5])
def test_calls_the_least_gap_apart_never_put_more_than_the_share_in_a_second(calls_per_s: int) -> None:
    gap = min_call_gap_s(calls_per_s)
    starts = [i * gap for i in range(50)]
    # AWS's second counts a call at u for one at t while t - u < 1 s; with the 10 ms slack, one more than the share
    # needs its calls to reach Kinesis more than 10 ms closer together than they started.
    most = max(sum(1 for u in starts if t - 1.0 < u <= t) for t in starts)
    assert most == calls_per_s
    shifted = [t - 0.011 if i % (calls_per_s + 1) == calls_per_s else t for i, t in enumerate(starts)]
    assert max(sum(1 for u in shifted if t - 1.0 < u <= t) for t in shifted) == calls_per_s + 1


def test_no_limit_kept_no_gap() -> None:
    assert min_call_gap_s(None) == 0.0


def test_an_answer_is_paid_back_from_its_calls_start_or_at_most_the_lag_before_its_answer() -> None:
    """AWS charges an answer somewhere in its call's round trip: a 5 MiB answer to a call of 0.2 s is paid back
    2.5 s after the call started; to a call of 1.4 s (a slow server), counted from half a second before the answer."""
    five_mib = 5 * 1024 * 1024
    assert SHARD_READ_BYTES_PER_S == 2 * 1024 * 1024 and MAX_CHARGE_LAG_S == 0.5
    assert paid_back_at(-math.inf, 10.0, 10.2, five_mib) == pytest.approx(12.5)
    assert paid_back_at(-math.inf, 10.0, 11.4, five_mib) == pytest.approx(11.4 - 0.5 + 2.5)
    assert paid_back_at(-math.inf, None, 11.4, five_mib) == pytest.approx(11.4 + 2.5)  # no start known: the answer
    assert paid_back_at(20.0, 10.0, 10.2, five_mib) == pytest.approx(22.5)  # after what the shard still owes
