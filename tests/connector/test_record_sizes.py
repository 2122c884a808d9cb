"""``pyspark_aws_kinesis.record_sizes``: a call's limit is what fits the byte budget of one call, between 1 and the
option's limit."""

from __future__ import annotations

from pyspark_aws_kinesis.fetch.polling.settings import FIRST_CALL_LIMIT
from pyspark_aws_kinesis.record_sizes import sized_limit


def test_limit_is_what_fits_the_byte_budget_of_one_call_between_1_and_the_options_limit() -> None:
    budget = 400 * 1024  # 2 MiB/s for 200 ms
    assert sized_limit(budget, 25 * 1024, FIRST_CALL_LIMIT, 10000) == 16
    assert sized_limit(budget, 100, FIRST_CALL_LIMIT, 10000) == 4096
    assert sized_limit(budget, 10, FIRST_CALL_LIMIT, 10000) == 10000  # never above AWS's (or the user's) Limit
    assert sized_limit(budget, 10, FIRST_CALL_LIMIT, 500) == 500
    assert sized_limit(budget, 1024 * 1024, FIRST_CALL_LIMIT, 10000) == 1  # one record bigger than the budget
    assert sized_limit(budget, None, FIRST_CALL_LIMIT, 10000) == FIRST_CALL_LIMIT  # size unknown: the first call
    assert sized_limit(budget, None, FIRST_CALL_LIMIT, 3) == 3
