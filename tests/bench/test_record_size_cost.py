"""``bench.record_size_cost``: the calls it encodes are the ones a sink would make, and its memory check tells
botocore's read of a large answer from the reader client's."""

from __future__ import annotations

import pytest

from bench.record_size_cost import ENTRIES_PER_CALL, PUT_BYTES, MiB, calls, memory_of_one_record, records_of
from localaws import LocalServer


def test_records_fill_calls_up_to_500_entries_or_8_mib() -> None:
    small, large = records_of(1024, 600 * 1024), records_of(5 * MiB, 12 * MiB)
    assert [len(call) for call in calls(small)] == [ENTRIES_PER_CALL, 100]
    assert all(len(data) + len(key) == 1024 for data, key in small)
    assert [len(call) for call in calls(large)] == [1, 1] and all(len(d) < PUT_BYTES for d, _ in large)


@pytest.mark.slow
def test_the_memory_check_sees_botocore_hold_the_body_twice_and_ours_once(kinesis_mock: LocalServer) -> None:
    size = 3 * MiB // 2
    theirs, ours = (memory_of_one_record(kinesis_mock, size, how) for how in ("botocore", "ours"))
    # Each reads its own stream: sequence numbers and iterators may differ in length by a few bytes.
    assert abs(ours["body"] - theirs["body"]) < 1024 and ours["body"] > 4 * size // 3  # base64 in JSON
    assert ours["fetch"] < 1.2 * ours["body"] < 1.5 * ours["body"] < theirs["fetch"], (ours, theirs)
    assert 0.9 * size < ours["decode"] < 1.2 * size, ours  # the decoded record, which Arrow shares
