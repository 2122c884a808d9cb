"""``bench.large_records``: the records a large-record benchmark writes and reads have the share and sizes asked
for, and the bytes; its read rate is taken over the seconds that moved bytes, with the query's start left out
where asked."""

from __future__ import annotations

import pytest

from bench.large_records import SMALL_BYTES, mix, read_rate, start_s
from kinesis_generator.large_records import LargeRecords
from localaws.quota_stats import LoggedCall, QuotaReport

MiB = 1024 * 1024


def test_the_mix_holds_the_bytes_asked_with_the_share_of_large_records() -> None:
    records = mix(40 * MiB, LargeRecords(0.02, 5 * MiB))
    sizes = [len(key) + len(data) for key, data in records]
    large = [size for size in sizes if size > MiB]
    assert 40 * MiB <= sum(sizes) < 40 * MiB + 5 * MiB
    assert set(large) == {5 * MiB} and len(large) == int(len(records) * 0.02)
    assert set(sizes) - {5 * MiB} == {SMALL_BYTES}


def test_the_read_rate_is_the_pace_of_the_admitted_calls_and_can_leave_the_querys_start_out() -> None:
    """A probe of 2 KB at 1.0 s, the query's first read at 5.0 s, then a 5 MiB answer every 2.5 s to 12.5 s (a
    refused call between): 15 MiB moved over the 7.5 s from the first read to the last, 2 MiB/s."""
    answers = [(1.0, 2048, False), (5.0, 5 * MiB, False), (6.0, 0, True), (7.5, 5 * MiB, False)]
    answers += [(10.0, 5 * MiB, False), (12.5, 5 * MiB, False)]
    calls = [LoggedCall(at, "ours", "GetRecords", "s", "shardId-0", refused, b) for at, b, refused in answers]
    report = QuotaReport([], 0.0, 13.0, {}, calls)
    rate, seconds = read_rate(report, "s")
    assert seconds == 11.5 and rate == pytest.approx((15 * MiB + 2048) / 11.5 / MiB)
    assert read_rate(report, "s", skip=1) == (pytest.approx(2.0), 7.5)
    assert read_rate(report, "s", client="theirs") == (0.0, 0.0)
    assert start_s(report, "s") == pytest.approx(4.0) and start_s(report, "other") == 0.0
