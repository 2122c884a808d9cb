"""The quota rules on their own (no server, a hand-moved clock): what is refused, when, with which code; and the
counts' report: sums, groups, time series, JSON, the refusal-share assertion."""

from __future__ import annotations

import pytest

from localaws.quota_model import (
    HashRanges,
    ManualClock,
    MiB,
    QuotaBook,
    Quotas,
    SlidingWindow,
    consumer_parts,
    hash_key,
    record_bytes,
    size_refusal,
    stream_of,
)
from localaws.quota_stats import QuotaReport, QuotaStats, assert_refused_at_most, parse_groups

A, B = ("s", "shardId-000000000000"), ("s", "shardId-000000000001")
ARN = "arn:aws:kinesis:us-east-1:000000000000:stream/s/consumer/c:1700000000"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def book(clock: ManualClock) -> QuotaBook:
    return QuotaBook(Quotas(), clock)


def test_a_sliding_window_counts_a_unit_for_exactly_its_span() -> None:
    window = SlidingWindow(2, span_s=1.0)
    assert window.try_take(10.0) and window.try_take(10.5)
    assert not window.try_take(10.99)  # refused units take nothing
    assert window.try_take(11.0)  # the unit of 10.0 no longer counts
    assert not window.try_take(11.2)


def test_the_sixth_get_records_in_a_second_is_refused_on_its_shard_only(book: QuotaBook, clock: ManualClock) -> None:
    assert [book.get_records(A) for _ in range(5)] == [None] * 5
    refusal = book.get_records(A)
    assert refusal is not None
    assert refusal.code == "ProvisionedThroughputExceededException" and refusal.reason == "calls"
    assert refusal.message == "Rate exceeded for Shard - 000000000000/s/shardId-000000000000"
    assert [book.get_records(B) for _ in range(5)] == [None] * 5
    clock.advance(0.999)
    assert book.get_records(A) is not None
    clock.advance(0.001)
    assert [book.get_records(A) for _ in range(5)] == [None] * 5


def test_read_bytes_are_paid_back_at_2_mib_per_second_by_every_reader_of_the_shard(book, clock) -> None:
    assert book.get_records(A) is None
    book.charge_read(A, 10 * MiB)  # AWS: after a 10 MiB answer, calls within the next 5 s fail
    clock.advance(3.999)  # 8 MiB paid back after an idle shard: more than a second's 2 MiB still owed
    refusal = book.get_records(A)
    assert refusal is not None and refusal.reason == "bytes"
    assert book.get_records(B) is None
    clock.advance(0.001)
    assert book.get_records(A) is None


def test_a_10_mib_answer_on_a_busy_shard_refuses_for_5_s(book, clock) -> None:
    book.charge_read(A, 2 * MiB)  # a second's budget already taken
    book.charge_read(A, 10 * MiB)
    clock.advance(4.999)
    assert book.get_records(A) is not None
    clock.advance(0.001)
    assert book.get_records(A) is None


def test_small_answers_close_together_are_not_refused_for_bytes(book, clock) -> None:
    """Two readers of a shard, each calling right after the other's 100 KiB answer: AWS's 2 MiB/s is an average,
    and five calls returning 1 MiB in a second are refused for nothing but a sixth call."""
    for _ in range(5):
        assert book.get_records(A) is None
        book.charge_read(A, MiB // 5)
        clock.advance(0.01)
    refusal = book.get_records(A)
    assert refusal is not None and refusal.reason == "calls"


def test_reading_faster_than_2_mib_per_second_is_refused_after_a_burst(book, clock) -> None:
    """1 MiB every 200 ms (5 MiB/s): the debt grows by 0.3 s per call, so within a few calls it passes a second."""
    admitted = 0
    for _ in range(25):  # 5 s
        if book.get_records(A) is None:
            admitted += 1
            book.charge_read(A, MiB)
        clock.advance(0.2)
    assert 10 <= admitted <= 2 * 5 + 2  # 2 MiB/s over 5 s is 10 MiB, plus a burst of one second's budget


def test_a_reader_at_the_limit_is_never_refused(book: QuotaBook, clock: ManualClock) -> None:
    """400 KiB every 200 ms is 2 MiB/s in 5 calls/s: exactly the quota."""
    for _ in range(50):
        assert book.get_records(A) is None
        book.charge_read(A, 2 * MiB // 5)
        clock.advance(0.2)


def test_writes_are_refused_entry_by_entry_beyond_1000_records_or_1_mib(book, clock) -> None:
    assert [book.put_entry(A, 10) for _ in range(1000)] == [None] * 1000
    refusal = book.put_entry(A, 10)
    assert refusal is not None and refusal.reason == "records"
    assert refusal.message == "Rate exceeded for shard shardId-000000000000 in stream s under account 000000000000."
    assert book.put_entry(B, MiB) is None
    refusal = book.put_entry(B, 1)
    assert refusal is not None and refusal.reason == "bytes"
    clock.advance(1.0)
    assert book.put_entry(A, 10) is None and book.put_entry(B, MiB) is None


def test_large_records_come_out_of_a_10_mib_reserve_that_refills_at_the_write_rate(book, clock) -> None:
    assert book.put_entry(A, 6 * MiB) is None  # an idle shard: the reserve is full
    refusal = book.put_entry(A, 5 * MiB)
    assert refusal is not None and (refusal.code, refusal.reason) == ("ProvisionedThroughputExceededException", "burst")
    clock.advance(1.0)
    assert book.put_entry(A, 5 * MiB) is None  # 4 MiB left, and a second of refill
    clock.advance(1.0)
    assert book.put_entry(A, MiB) is None  # small records go on while the reserve is low: the sliding second rules
    clock.advance(1.5)
    assert book.put_entry(A, 2 * MiB) is not None  # the 1 MiB written drained the first second's refill: 1.5 MiB
    clock.advance(0.5)
    assert book.put_entry(A, 2 * MiB) is None
    clock.advance(10.0)
    assert book.put_entry(A, 10 * MiB) is None  # full again


def test_a_shard_written_at_its_full_rate_never_refills_its_reserve(book, clock) -> None:
    assert book.put_entry(A, 8 * MiB) is None
    for _ in range(20):
        clock.advance(1.0)
        assert book.put_entry(A, MiB) is None
    assert book.put_entry(A, 3 * MiB) is not None


@pytest.mark.parametrize(
    ("sizes", "maximum", "put_record", "expected"),
    [
        ([10, MiB], MiB, False, None),
        ([10, MiB + 1], MiB, False, ("ValidationException", "'records.2.member.data'", f"or equal to {MiB}")),
        ([MiB + 1], MiB, True, ("ValidationException", "Value at 'data'", f"or equal to {MiB}")),
        ([4 * MiB + 1], 4 * MiB, True, ("ValidationException", "Value at 'data'", f"or equal to {4 * MiB}")),
        ([MiB] * 5, MiB, False, None),
        ([MiB] * 5 + [1], MiB, False, ("InvalidArgumentException", "Records size exceeds 5 MB limit", "")),
        ([3 * MiB] * 3, 3 * MiB, False, None),
        ([3 * MiB] * 3 + [MiB + 1], 3 * MiB, False, ("InvalidArgumentException", "exceeds 10 MB limit", "")),
    ],
)
def test_a_record_over_the_streams_maximum_or_a_call_over_its_limit_is_refused_whole(
    sizes: list[int], maximum: int, put_record: bool, expected: tuple[str, str, str] | None
) -> None:
    refusal = size_refusal(sizes, maximum, put_record)
    if expected is None:
        assert refusal is None
        return
    assert refusal is not None and refusal.code == expected[0] and refusal.reason == "too_large"
    assert expected[1] in refusal.message and expected[2] in refusal.message


def test_subscribe_to_shard_once_a_second_and_not_within_5_s_of_a_success(book, clock) -> None:
    assert book.subscribe(ARN, "shardId-000000000000") is None
    book.subscribed(ARN, "shardId-000000000000")
    clock.advance(0.5)
    refusal = book.subscribe(ARN, "shardId-000000000000")
    assert refusal is not None and (refusal.code, refusal.reason) == ("LimitExceededException", "calls")
    clock.advance(0.5)
    refusal = book.subscribe(ARN, "shardId-000000000000")
    assert refusal is not None and (refusal.code, refusal.reason) == ("ResourceInUseException", "in_use")
    assert "000000000000:s:shardId-000000000000:c" in refusal.message
    assert book.subscribe(ARN, "shardId-000000000001") is None  # another shard of the consumer
    clock.advance(3.999)
    assert book.subscribe(ARN, "shardId-000000000000") is not None
    clock.advance(1.0)
    assert book.subscribe(ARN, "shardId-000000000000") is None


def test_event_pushes_wait_until_the_earlier_ones_are_paid_back(book: QuotaBook, clock: ManualClock) -> None:
    started = clock.now()
    for _ in range(3):
        book.push(ARN, "shardId-000000000000", MiB)  # the first goes at once, each next one 0.5 s later
    assert clock.now() - started == pytest.approx(1.0)
    book.push(ARN, "shardId-000000000001", MiB)  # another shard has its own 2 MiB/s
    assert clock.now() - started == pytest.approx(1.0)


def test_control_plane_limits_per_stream_and_per_account(book: QuotaBook, clock: ManualClock) -> None:
    assert [book.control("ListStreamConsumers", "s") for _ in range(5)] == [None] * 5
    refusal = book.control("ListStreamConsumers", "s")
    assert refusal is not None and refusal.code == "LimitExceededException"
    assert refusal.message == "Rate exceeded for stream s under account 000000000000."
    assert book.control("ListStreamConsumers", "t") is None  # per stream
    assert [book.control("DescribeStreamSummary", f"s{i}") for i in range(20)] == [None] * 20
    assert book.control("DescribeStreamSummary", "other") is not None  # per account
    assert book.control("CreateStream", "s") is None  # not limited here
    assert book.creating(4) is None
    refusal = book.creating(5)
    assert refusal is not None and (refusal.code, refusal.reason) == ("LimitExceededException", "creating")


def test_records_are_routed_and_sized_as_kinesis_does() -> None:
    half = 2**127
    ranges = HashRanges(
        [
            {"ShardId": "old", "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": str(2**128 - 1)},
             "SequenceNumberRange": {"StartingSequenceNumber": "1", "EndingSequenceNumber": "2"}},
            {"ShardId": "low", "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": str(half - 1)},
             "SequenceNumberRange": {"StartingSequenceNumber": "3"}},
            {"ShardId": "high", "HashKeyRange": {"StartingHashKey": str(half), "EndingHashKey": str(2**128 - 1)},
             "SequenceNumberRange": {"StartingSequenceNumber": "3"}},
        ]
    )  # fmt: skip
    assert ranges.shard_of(hash_key("x", str(half - 1))) == "low"
    assert ranges.shard_of(hash_key("x", str(half))) == "high"
    # MD5("a") = 0cc175b9c0f1b6a831c399e269772661, in the lower half.
    assert hash_key("a") == 0x0CC175B9C0F1B6A831C399E269772661 and ranges.shard_of(hash_key("a")) == "low"
    assert record_bytes({"Data": "YWJj", "PartitionKey": "kéy"}) == 3 + 4  # base64 of b"abc"; UTF-8 key
    assert record_bytes({"Data": "YQ==", "PartitionKey": ""}) == 1
    assert stream_of({"StreamARN": "arn:aws:kinesis:us-east-1:000000000000:stream/s"}) == "s"
    assert stream_of({"ConsumerARN": ARN}) == "s" and consumer_parts(ARN) == ("s", "c")


def _stats(clock: ManualClock) -> QuotaStats:
    stats = QuotaStats(clock, Quotas().as_dict())
    stats.count("Boto3 app/ours", "GetRecords", "s", A[1], calls=5, records=10, nbytes=100)
    stats.count("Boto3 app/ours", "GetRecords", "s", A[1], calls=1, refused=1, reason="calls")
    clock.advance(2.5)
    stats.count("Boto3 app/neighbour", "GetRecords", "s", B[1], calls=2, refused=1, reason="bytes")
    stats.count("Boto3 app/ours", "PutRecords", "s", B[1], calls=1, records=3, nbytes=30)
    stats.count("Boto3 app/ours", "PutRecords", "s", B[1], refused_records=1, reason="records")
    return stats


def test_the_report_sums_groups_and_keeps_the_seconds(clock: ManualClock) -> None:
    report = _stats(clock).report()
    ours = report.tally(client="ours", action="GetRecords")
    assert (ours.calls, ours.refused, ours.records, ours.bytes) == (6, 1, 10, 100)
    assert ours.refusals == {"calls": 1} and ours.refused_share == pytest.approx(1 / 6)
    writes = report.tally(action="PutRecords")
    assert (writes.records, writes.refused_records, writes.refused_record_share) == (3, 1, 0.25)
    assert {shard: t.calls for shard, t in report.by("shard", action="GetRecords").items()} == {A[1]: 6, B[1]: 2}
    assert [t.calls for t in report.per_second(action="GetRecords")] == [6, 0, 2]
    grouped = report.grouped({"mine": "app/ours", "theirs": "neighbour"})
    assert grouped.clients() == ["mine", "theirs"]
    assert grouped.tally(client="theirs").refusals == {"bytes": 1}
    again = QuotaReport.from_json(grouped.to_json())
    assert again.to_json() == grouped.to_json()
    assert "GetRecords" in report.summary() and "refused" in report.summary()


def test_the_refusal_share_assertion_names_the_client_and_each_shard(clock: ManualClock) -> None:
    report = _stats(clock).report()
    assert assert_refused_at_most(report, 0.2, client="ours").calls == 6
    with pytest.raises(AssertionError, match=r"'neighbour' had 50.00% of its calls of .*GetRecords.* refused"):
        assert_refused_at_most(report, 0.01, client="neighbour")
    with pytest.raises(AssertionError, match="shardId-000000000001: 0/1 calls, 1 entries"):
        assert_refused_at_most(report, 0.1, client="ours", action="PutRecords", entries=True)


def test_groups_from_a_query_need_a_label_and_a_substring() -> None:
    assert parse_groups(["ours=app/ours", "n=x=y"]) == {"ours": "app/ours", "n": "x=y"}
    with pytest.raises(ValueError, match="group: got 'ours'; allowed: label=substring"):
        parse_groups(["ours"])
