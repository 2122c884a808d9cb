"""``pyspark_aws_kinesis.record_sizes``: a call's limit is what fits the byte budget of one call, between 1 and the
option's limit, learnt from the small records, and with large records (over 1 MiB) about one of them a call."""

from __future__ import annotations

import pytest

from pyspark_aws_kinesis.fetch.polling.settings import FIRST_CALL_LIMIT
from pyspark_aws_kinesis.record_sizes import RecordSizes, large_records, sized_limit

MiB = 1024 * 1024


def test_limit_is_what_fits_the_byte_budget_of_one_call_between_1_and_the_options_limit() -> None:
    budget = 400 * 1024  # 2 MiB/s for 200 ms
    assert sized_limit(budget, 25 * 1024, FIRST_CALL_LIMIT, 10000) == 16
    assert sized_limit(budget, 100, FIRST_CALL_LIMIT, 10000) == 4096
    assert sized_limit(budget, 10, FIRST_CALL_LIMIT, 10000) == 10000  # never above AWS's (or the user's) Limit
    assert sized_limit(budget, 10, FIRST_CALL_LIMIT, 500) == 500
    assert sized_limit(budget, 1024 * 1024, FIRST_CALL_LIMIT, 10000) == 1  # one record bigger than the budget
    assert sized_limit(budget, None, FIRST_CALL_LIMIT, 10000) == FIRST_CALL_LIMIT  # size unknown: the first call
    assert sized_limit(budget, None, FIRST_CALL_LIMIT, 3) == 3


def test_a_rare_large_record_leaves_the_small_records_limit_and_caps_it_at_one_large_a_call() -> None:
    """2 % of the records 5 MiB among 200-byte ones: the mean would be ~105 KiB and ``Limit`` 3 (a call for a few
    small records at a time, each a fifth of the shard's calls); counted apart, the small ones keep their size and
    the large ones cap ``Limit`` at about one of them a call."""
    sizes: RecordSizes[str] = RecordSizes()
    budget = 512 * 1024
    for answer in range(20):
        large = answer % 2  # every other answer of 25 records holds one large record
        records = [5 * MiB] * large + [200] * (25 - large)
        sizes.learn("s", len(records), sum(records), large_records(records, sum(records)))
    assert sizes.get("s") == 200 and sizes.large_share("s") == pytest.approx(0.02, rel=0.1)
    assert sized_limit(budget, sizes.get("s"), FIRST_CALL_LIMIT, 10000, sizes.large_share("s")) in range(45, 56)
    mean = sum([5 * MiB] + [200] * 49) / 50
    assert sized_limit(budget, mean, FIRST_CALL_LIMIT, 10000) == 4  # the mean's Limit, for comparison


def test_the_large_share_fades_once_large_records_stop_and_only_large_ones_give_limit_1() -> None:
    sizes: RecordSizes[str] = RecordSizes()
    sizes.learn("s", 1, 5 * MiB, (1, 5 * MiB))  # only a large record so far
    assert sized_limit(512 * 1024, sizes.get("s"), FIRST_CALL_LIMIT, 10000, sizes.large_share("s")) == 1
    for _ in range(20):
        sizes.learn("s", 500, 500 * 200)
    assert sizes.large_share("s") < 0.0001 and sizes.get("s") == pytest.approx(200, rel=0.01)
    sizes.forget("s")
    assert sizes.get("s") is None and sizes.large_share("s") == 0.0


def test_large_records_are_counted_only_past_1_mib() -> None:
    assert large_records([MiB, MiB + 1, 10], 2 * MiB + 11) == (1, MiB + 1)
    assert large_records(iter_never_walked(), MiB) == (0, 0)  # the answer's bytes tell: none can be


def iter_never_walked():
    raise AssertionError("walked")
    yield 0
