"""``pyspark_aws_kinesis.source.probe_answers.judge``: what one probe's GetRecords answer says about a shard. Answers
are made up: no server."""

from __future__ import annotations

import pytest

from pyspark_aws_kinesis.fetch.decode import AnswerSummary
from pyspark_aws_kinesis.source.probe_answers import Found, ProbeResult, judge


def _page(arrivals_ms: list[int | None], next_iterator: str | None = "it", behind: int | None = 0) -> AnswerSummary:
    first_us = None if not arrivals_ms or arrivals_ms[0] is None else arrivals_ms[0] * 1000
    return AnswerSummary(len(arrivals_ms), len(arrivals_ms) * 2, (0, 0), first_us, next_iterator, behind)


def test_a_record_is_data_with_its_arrival_time() -> None:
    assert judge(_page([1_000, 2_000], behind=5), None) == ProbeResult(Found.DATA, 5, 1_000)


@pytest.mark.parametrize(("bound_ms", "found"), [(999, Found.NOTHING), (1_000, Found.DATA), (5_000, Found.DATA)])
def test_a_record_counts_only_when_it_arrived_by_the_bound(bound_ms: int, found: Found) -> None:
    assert judge(_page([1_000]), bound_ms) == ProbeResult(found, 0, 1_000)


def test_a_record_without_an_arrival_time_is_data_whatever_the_bound() -> None:
    assert judge(_page([None]), 0) == ProbeResult(Found.DATA, 0, None)


def test_an_empty_page_without_a_next_iterator_is_the_shards_end() -> None:
    assert judge(_page([], next_iterator=None, behind=0), None) == ProbeResult(Found.SHARD_END, 0)


def test_an_empty_page_behind_the_tip_is_data_further_on() -> None:
    """AWS skips through old, empty stretches: nothing here, but records further on."""
    assert judge(_page([], behind=86_400_000), None) == ProbeResult(Found.DATA, 86_400_000)


@pytest.mark.parametrize("behind", [0, None])
def test_an_empty_page_at_the_tip_is_nothing(behind: int | None) -> None:
    assert judge(_page([], behind=behind), None) == ProbeResult(Found.NOTHING, behind)
