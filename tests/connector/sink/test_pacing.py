"""The write pacer at the quota (``pyspark_aws_kinesis.sink.pacing``), on a simulated clock against the quota proxy's
own rules (``write_sim``): each shard is paced on its own, a lone writer fills every second of its shards without a
refusal, and writers sharing a shard without talking converge to the quota between them. Counts, not timings."""

from __future__ import annotations

import random
from collections import deque

import pytest

from localaws.quota_model import ManualClock
from pyspark_aws_kinesis.kpl import hash_key_of
from pyspark_aws_kinesis.sink.entries import Entry
from pyspark_aws_kinesis.sink.pacing import ANY_SHARD, SHARD_QUOTA, WritePacer
from pyspark_aws_kinesis.sink.planning import AggregateEntry
from pyspark_aws_kinesis.sink.put_records import put_all
from pyspark_aws_kinesis.sink.routing import MAX_REMEMBERED_KEYS, shard_buckets
from pyspark_aws_kinesis.sink.shard_queues import default_bucket
from tests.connector.sink.shard_map_util import SHARD_0, SHARD_1
from tests.connector.support.write_sim import ClockRetry, QuotaKinesis, kib_rows, router

MIB = 1024 * 1024


def _put(clock: ManualClock, kinesis: QuotaKinesis, entries: list[Entry], shards: int | None) -> None:
    retry = ClockRetry(max_retries=5, initial_interval_ms=100, max_interval_ms=5000, clock=clock)
    bucket_of = shard_buckets(router(shards)) if shards else None
    stats = put_all(kinesis, "s", entries, retry, pacer=WritePacer(clock.now), bucket_of=bucket_of)
    assert stats.records == len(entries) and not stats.failed_entries


def _inner(series: list[int]) -> list[int]:
    """The whole seconds of a write, without its first and last (partly spent before and after)."""
    return series[1:-1]


def test_a_lone_writer_fills_every_second_of_its_shard_without_a_refusal() -> None:
    """Starting at the shard's quota, and counting a write from the middle of its call: a writer that counted from
    the answer lost the answer's latency every second (here 1/1.07 of the quota), and one that learned the
    quota from a refusal was refused first."""
    clock = ManualClock(0.0)
    kinesis = QuotaKinesis(clock, shards=1, upload_s=0.02, answer_s=0.12)
    _put(clock, kinesis, kib_rows(8000), shards=1)
    assert kinesis.refused == 0
    assert min(_inner(kinesis.per_second(SHARD_0))) >= 0.95 * SHARD_QUOTA[0], kinesis.per_second(SHARD_0)


def test_a_full_shard_does_not_hold_back_the_others() -> None:
    """Three quarters of the rows go to shard 0: shard 1's are all stored within the first two seconds and at
    its quota, instead of at shard 0's pace (calls that carried both shards' rows waited for the busier one)."""
    clock = ManualClock(0.0)
    kinesis = QuotaKinesis(clock, shards=2)
    rows, shards = kib_rows(20000, keys=20000), router(2)
    heavy = [row for row in rows if shards.shard_of(hash_key_of(row.partition_key)) == 0][:6000]
    light = [row for row in rows if shards.shard_of(hash_key_of(row.partition_key)) == 1][:2000]
    entries = [entry for pair in zip(heavy[::3], heavy[1::3], heavy[2::3], light, strict=False) for entry in pair]
    _put(clock, kinesis, entries, shards=2)
    assert kinesis.per_second(SHARD_1) == [1000, 1000]
    assert kinesis.last_admitted[SHARD_1] < 2.0 < 5.0 < kinesis.last_admitted[SHARD_0]


def test_without_a_shard_map_the_stream_is_one_bucket_learned_from_its_first_refusal() -> None:
    clock = ManualClock(0.0)
    kinesis = QuotaKinesis(clock, shards=1)
    _put(clock, kinesis, kib_rows(4000), shards=None)
    # The call that met the quota taught the budget; then calls paced to it, and a probe for more or two.
    assert 0 < kinesis.refused <= 2 * 500
    assert min(_inner(kinesis.per_second(SHARD_0))) >= 0.9 * SHARD_QUOTA[0], kinesis.per_second(SHARD_0)
    assert default_bucket(Entry(b"x", "k")) == ANY_SHARD


class _Sized:
    def __init__(self, size: int):
        self.size = size


def _share_a_shard(
    writers: int, entries_each: int, size: int, upload_s: float, answer_s: float
) -> tuple[list[int], int, int]:
    """``writers`` call sequences on one shard, each with its own pacer and nobody talking, run event by event on
    one clock: (bytes admitted per second, entries refused, calls)."""
    clock = ManualClock(0.0)
    kinesis = QuotaKinesis(clock)
    pacers = [WritePacer(clock.now, random.Random(writer)) for writer in range(writers)]
    queues = [{SHARD_0: deque(_Sized(size) for _ in range(entries_each))} for _ in range(writers)]
    ready_at = [0.01 * writer for writer in range(writers)]
    while any(queue[SHARD_0] for queue in queues):
        writer = min((w for w in range(writers) if queues[w][SHARD_0]), key=lambda w: ready_at[w])
        clock._now = ready_at[writer]  # the writer's next move happens now
        counts, wait_s = pacers[writer].plan(queues[writer], 500, 5 * 1024 * 1024)
        if not counts:
            ready_at[writer] += wait_s
            continue
        sent_at, queue = clock.now(), queues[writer][SHARD_0]
        sending = [queue.popleft() for _ in range(counts[SHARD_0])]
        kinesis.calls += 1
        clock.advance(upload_s)
        refused = [entry for entry in sending if kinesis.book.put_entry(("s", SHARD_0), entry.size) is not None]
        kinesis.admitted[(SHARD_0, int(clock.now()))] += (len(sending) - len(refused)) * size
        kinesis.refused += len(refused)
        clock.advance(answer_s)
        stored = len(sending) - len(refused)
        pacers[writer].record(
            {SHARD_0: (stored, stored * size)} if stored else {}, {SHARD_0} if refused else set(), sent_at
        )
        queue.extendleft(reversed(refused))
        ready_at[writer] = clock.now()
    return kinesis.per_second(SHARD_0), kinesis.refused, kinesis.calls


@pytest.mark.parametrize(
    ("writers", "size", "entries"),
    [(2, 1008, 6000), (2, 256 * 1024, 48)],
    ids=["plain", "aggregates"],
)
def test_writers_sharing_a_shard_converge_to_its_quota_between_them(writers: int, size: int, entries: int) -> None:
    """Each writer's budget shrinks on a refusal (toward what it holds of the full second, at most halving) and
    grows after a second in which it held entries back (AIMD): the shard takes >= 90 % of its quota through the
    write, and nobody spins. Budgets that shrank to what was held at the first refusal and grew only when filled
    left a shard of 256 KiB aggregates at 44 % (a budget under two aggregates is never filled)."""
    series, refused, calls = _share_a_shard(writers, entries, size, upload_s=0.02, answer_s=0.08)
    inner = _inner(series)
    limit = SHARD_QUOTA[0] * size if size * SHARD_QUOTA[0] < SHARD_QUOTA[1] else SHARD_QUOTA[1]
    assert sum(inner) / len(inner) >= 0.9 * limit, series
    assert refused * size <= 0.4 * sum(series), (refused, series)  # refused entries come back when there is room
    assert calls <= 10 * writers * len(series), calls  # about one call per writer and burst, not a busy retry


def _kib(count: int) -> list[Entry]:
    return [Entry(b"x" * 1020, f"k{i}") for i in range(count)]


def test_the_stream_bucket_learns_its_budget_from_the_first_refusal_and_waits_for_the_payback() -> None:
    clock = ManualClock(100.0)
    pacer = WritePacer(clock.now)
    assert pacer.plan({ANY_SHARD: _kib(1500)}, 1000, 5 * MIB) == ({ANY_SHARD: 1000}, 0.0)  # nothing learned yet
    pacer.record({ANY_SHARD: (600, 600 * 1024)}, set())
    clock.advance(0.4)
    pacer.record({ANY_SHARD: (400, 400 * 1024)}, {ANY_SHARD})  # refused: the budget is what it took, 1,000
    clock.advance(0.1)
    assert pacer.plan({ANY_SHARD: _kib(500)}, 1000, 5 * MIB) == ({}, pytest.approx(0.5))  # the 600's payback
    clock.advance(0.5)
    assert pacer.plan({ANY_SHARD: _kib(700)}, 1000, 5 * MIB) == ({ANY_SHARD: 600}, 0.0)  # beside the 400


def test_a_shard_bucket_starts_at_the_quota_and_a_full_shard_waits_while_the_others_go() -> None:
    clock = ManualClock(100.0)
    pacer = WritePacer(clock.now)
    full, free = AggregateEntry(b"x" * 1000, "a", None, SHARD_0), AggregateEntry(b"y" * 1000, "b", None, SHARD_1)
    assert pacer.budget(SHARD_0) == SHARD_QUOTA  # unrefused
    assert pacer.plan({SHARD_0: _kib(1200)}, 5000, 50 * MIB) == ({SHARD_0: 250}, 0.0)  # a quarter a call
    pacer.record({SHARD_0: (1, MIB - 10)}, set())  # one aggregate filled the shard's second
    assert pacer.plan({SHARD_0: [full], SHARD_1: [free]}, 500, 5 * MIB) == ({SHARD_1: 1}, 0.0)
    assert pacer.plan({SHARD_0: [full]}, 500, 5 * MIB) == ({}, pytest.approx(1.0))


def test_the_budget_shrinks_once_a_second_on_refusals_and_grows_back_when_it_holds_entries_back() -> None:
    clock = ManualClock(100.0)
    pacer = WritePacer(clock.now)

    def records_budget() -> int:
        return round(pacer.budget(SHARD_0)[0])

    def refused_while_holding(records: int) -> None:  # others fill the shard: our writes do not
        pacer.record({SHARD_0: (records, records * 1024)}, {SHARD_0})

    def held_back_then_quiet(records: int) -> None:  # the budget keeps entries back; a second without refusal
        pacer.record({SHARD_0: (records, records * 1024)}, set())
        assert pacer.plan({SHARD_0: _kib(10)}, 500, 5 * MIB) == ({}, pytest.approx(1.0))
        clock.advance(1.0)
        pacer.record({SHARD_0: (1, 1024)}, set())

    refused_while_holding(500)
    clock.advance(0.5)
    refused_while_holding(0)  # the same overshoot: no second decrease
    assert records_budget() == 900
    clock.advance(1.0)
    refused_while_holding(400)
    assert records_budget() == 810
    clock.advance(1.0)
    refused_while_holding(300)
    assert records_budget() == 729
    clock.advance(1.0)
    held_back_then_quiet(729)
    assert records_budget() == 929
    held_back_then_quiet(928)
    assert records_budget() == 1000  # the step doubled; never beyond the quota


def test_a_refusal_our_own_writes_explain_moves_the_stamps_later_and_leaves_the_budget() -> None:
    """A call refused while our writes of the last second (by their answers) fill the shard: the stamps were
    early (the stream counted that second from later in the round trip), not another writer."""
    clock = ManualClock(100.0)
    pacer = WritePacer(clock.now)
    clock.advance(0.2)
    pacer.record({SHARD_0: (1000, 1000 * 1024)}, set(), sent_at=100.0)  # stamped at 100.1 (half the round trip)
    clock.advance(0.95)
    assert pacer.plan({SHARD_0: _kib(600)}, 500, 5 * MIB) == ({SHARD_0: 250}, 0.0)  # 100.1 + 1 s has passed
    clock.advance(0.2)
    pacer.record({}, {SHARD_0}, sent_at=101.15)  # but the stream still counted the first call's records
    assert pacer.lag == 0.75
    assert pacer.budget(SHARD_0) == SHARD_QUOTA  # the budget is whole


def test_the_shard_of_each_partition_key_is_remembered_within_a_bound() -> None:
    """The generator routes for as long as it runs, and its default keys are random (one per record): the memo of
    each key's shard stays bounded, and every entry still goes to the shard Kinesis would route it to."""
    shards = router(4)
    bucket_of = shard_buckets(shards)
    keys = [f"key-{i}" for i in range(MAX_REMEMBERED_KEYS * 2 + 10)]
    for key in keys:
        bucket_of(Entry(b"x", key))
        assert bucket_of.remembered <= MAX_REMEMBERED_KEYS
    for key in keys[:: len(keys) // 50]:  # after the memo started over, and before
        assert bucket_of(Entry(b"x", key)) == shards.shard_id(shards.shard_of(hash_key_of(key)))
