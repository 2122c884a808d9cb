"""``pyspark_aws_kinesis.fetch.polling.settings.PollingSettings``: how the GetRecords transport asks a shard, and the
bytes one answer may hold."""

from __future__ import annotations

import dataclasses

import pytest

from pyspark_aws_kinesis.fetch.polling.settings import FIRST_CALL_LIMIT, MIN_BUSY_INTERVAL_S, PollingSettings
from pyspark_aws_kinesis.record_sizes import SHARD_READ_BYTES_PER_S


def test_the_defaults_are_the_aws_connectors() -> None:
    settings = PollingSettings()
    assert (settings.records_per_call, settings.fetch_interval_s, settings.first_call_limit) == (10000, 0.2, None)
    assert FIRST_CALL_LIMIT == 10


def test_four_calls_a_second_carry_the_shards_read_quota_when_more_records_wait() -> None:
    assert MIN_BUSY_INTERVAL_S == 0.25
    assert PollingSettings(fetch_interval_s=0.2).call_budget_bytes == SHARD_READ_BYTES_PER_S / 4
    assert PollingSettings(fetch_interval_s=0.0).call_budget_bytes == SHARD_READ_BYTES_PER_S / 4


def test_a_longer_interval_lets_one_answer_hold_the_quota_of_that_interval() -> None:
    assert PollingSettings(fetch_interval_s=1.0).call_budget_bytes == SHARD_READ_BYTES_PER_S
    assert PollingSettings(fetch_interval_s=2.0).call_budget_bytes == 2 * SHARD_READ_BYTES_PER_S


def test_the_settings_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        PollingSettings().records_per_call = 1  # type: ignore[misc]


def test_the_call_interval_is_the_fetch_interval_or_the_querys_least_gap() -> None:
    assert PollingSettings(fetch_interval_s=0.2).call_interval_s == 0.2
    assert PollingSettings(fetch_interval_s=0.2, min_call_gap_s=0.2525).call_interval_s == 0.2525
    assert PollingSettings(fetch_interval_s=0.5, min_call_gap_s=0.2525).call_interval_s == 0.5
