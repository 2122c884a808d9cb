"""``kinesis_generator.run`` against kinesalite: every record arrives once, the rate holds, failed entries are retried
(faults injected by ``localaws.fault_proxy``), aggregates read back with ``pyspark_aws_kinesis.kpl.deaggregate``."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

import kinesis_generator
from kinesis_generator import deadline as deadline_module
from kinesis_generator import sender
from kinesis_generator.deadline import Deadline
from kinesis_generator.helpers import Context
from kinesis_generator.rates import ConstantRate
from kinesis_generator.template import Template
from localaws.fault_proxy import FaultProxy, Faults
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY, LocalServer
from localaws.streams import iterate_shard, read_stream
from pyspark_aws_kinesis.kpl import UserRecord, deaggregate, hash_key_of, is_aggregated
from pyspark_aws_kinesis.retry import RetryPolicy
from tests.generator.stored_util import assert_stored_as_reported

FAST_RETRY = RetryPolicy(max_retries=8, initial_interval_ms=5, max_interval_ms=50)


@pytest.fixture(autouse=True)
def dummy_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """``pyspark_aws_kinesis.aws`` uses boto3's default chain; the local servers accept any keys."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", DUMMY_ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", DUMMY_SECRET_KEY)


def stored(kinesalite: LocalServer, stream: str) -> Counter[tuple[str, bytes]]:
    return Counter((r["PartitionKey"], r["Data"]) for r in read_stream(kinesalite.client("kinesis"), stream))


def test_count_run_stores_every_record_once(kinesalite: LocalServer, lite_stream):
    stream = lite_stream(shards=2)
    batches: list[int] = []
    summary = kinesis_generator.run(
        stream_name=stream,
        count=1200,
        rate=20_000,
        endpoint_url=kinesalite.endpoint_url,
        workers=3,
        collect=True,
        on_sent=lambda users: batches.append(len(users)),
    )
    assert (summary.records, summary.kinesis_records, summary.failed) == (1200, 1200, 0)
    assert sum(batches) == 1200 and summary.sent_records is not None
    assert_stored_as_reported(stored(kinesalite, stream), summary)
    countries = {json.loads(data)["data"] for _, data in summary.sent_records}
    assert countries == {"Spain", "Portugal", "Finland", "France"}
    assert summary.bytes == sum(len(pk) + len(data) for pk, data in summary.sent_records)


def test_constant_rate_holds_over_a_short_run(kinesalite: LocalServer, lite_stream):
    stream = lite_stream()
    sent_at: list[tuple[float, int]] = []
    started = time.monotonic()
    summary = kinesis_generator.run(
        stream_name=stream,
        rate=400,
        duration_s=3.0,
        endpoint_url=kinesalite.endpoint_url,
        on_sent=lambda users: sent_at.append((time.monotonic() - started, len(users))),
    )
    assert summary.records == 1200
    assert summary.rate == pytest.approx(400, rel=0.05)
    # Evenly spread, not bursts: about half the records are out by half time, counted from the first batch
    # (building the client comes before the schedule starts).
    first = sent_at[0][0]
    by_half_time = sum(n for at, n in sent_at if at - first <= 1.5)
    assert 600 * 0.9 <= by_half_time <= 600 * 1.1


class LateSleeps:
    """The monotonic clock of a loaded machine, simulated: every sleep ends ``overrun_s`` late."""

    def __init__(self, overrun_s: float):
        self.now, self.overrun_s = 1000.0, overrun_s

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds + self.overrun_s


class QueuedRecords:
    """The sender pool as the schedule loop sees it: it takes every batch and counts its records."""

    def __init__(self, deadline: Deadline):
        self.deadline, self.fatal, self.queued = deadline, None, 0

    def submit(self, users: list, aggregated: object) -> bool:
        self.queued += len(users)
        return True


@pytest.mark.parametrize("overrun_ms", range(2, 60, 3))
def test_sleeps_that_end_late_still_queue_every_record_due_before_the_deadline(
    monkeypatch: pytest.MonkeyPatch, overrun_ms: int
) -> None:
    clock = LateSleeps(overrun_ms / 1000)
    monkeypatch.setattr(sender, "time", clock)
    monkeypatch.setattr(deadline_module, "time", clock)
    deadline = Deadline()
    deadline.set(clock.now + 3.0)
    pool = QueuedRecords(deadline)
    ctx = Context(seed=1)
    template = Template("{{random.number(9)}}", ctx)
    content = (template, template, None)
    sender._produce(ConstantRate(400), 1200, 3.0, clock.now, content, pool, None)  # type: ignore[arg-type]
    assert pool.queued == 1200


def test_periodic_mode_sends_a_burst_each_second(kinesalite: LocalServer, lite_stream):
    stream = lite_stream()
    summary = kinesis_generator.run(
        stream_name=stream, periodic=(150, 0), duration_s=2.0, client=kinesalite.client("kinesis"), collect=True
    )
    assert summary.records == 300 and summary.elapsed_s >= 1.0
    assert "periodic" in summary.target


def test_partial_failures_are_retried_without_duplicates(kinesalite: LocalServer, lite_stream):
    stream = lite_stream(shards=2)
    faults = Faults(put_records_entry_failure_rate=0.3, throttle_rate=0.3, actions=frozenset({"PutRecords"}))
    with FaultProxy(kinesalite.endpoint_url, faults, seed=3) as proxy:
        summary = kinesis_generator.run(
            stream_name=stream, count=1000, rate=50_000, endpoint_url=proxy.endpoint_url, retry=FAST_RETRY, collect=True
        )
    # Every injected fault was seen and retried: each failed entry once, each throttled call once.
    assert summary.retried_entries == summary.refused_entries == proxy.stats["failed_entries"] > 0
    assert summary.retried_calls == proxy.stats["throttled"] > 0
    assert (summary.records, summary.failed) == (1000, 0)
    assert_stored_as_reported(stored(kinesalite, stream), summary)


def test_records_sent_again_after_an_unanswered_call_are_reported_as_maybe_twice(kinesalite: LocalServer, lite_stream):
    stream = lite_stream(shards=2)
    faults = Faults(lost_answer_rate=0.3, actions=frozenset({"PutRecords"}))  # stored, then the proxy hangs up
    # Seed 1 loses the first call's answer (its first draw is 0.13): the clock decides how many calls 1000
    # records take, so a later first loss could fall past the last call.
    with FaultProxy(kinesalite.endpoint_url, faults, seed=1) as proxy:
        summary = kinesis_generator.run(
            stream_name=stream, count=1000, rate=50_000, endpoint_url=proxy.endpoint_url, retry=FAST_RETRY, collect=True
        )
    assert (summary.records, summary.failed, summary.unconfirmed) == (1000, 0, 0) and proxy.stats["answer_lost"] > 0
    # Every lost answer left its records in the stream once more: exactly the copies the summary calls doubtful.
    extra = stored(kinesalite, stream) - Counter(summary.sent_records)
    assert extra == Counter(summary.doubtful_records) and summary.stored_again == len(set(extra)) > 0
    assert f"stored again: {summary.stored_again} records were sent again" in "\n".join(summary.lines())


def test_entries_failing_through_the_budget_are_counted_and_the_run_goes_on(kinesalite: LocalServer, lite_stream):
    stream = lite_stream()
    faults = Faults(put_records_entry_failure_rate=1.0, actions=frozenset({"PutRecords"}))
    with FaultProxy(kinesalite.endpoint_url, faults) as proxy:
        summary = kinesis_generator.run(
            stream_name=stream,
            count=30,
            rate=100,
            endpoint_url=proxy.endpoint_url,
            retry=RetryPolicy(max_retries=1, initial_interval_ms=1, max_interval_ms=2),
        )
    assert (summary.records, summary.failed) == (0, 30)
    assert summary.retried_entries >= 30
    assert not stored(kinesalite, stream)


def test_aggregated_records_are_readable_by_our_deaggregation(kinesalite: LocalServer, lite_stream):
    stream = lite_stream(shards=3)
    kinesis = kinesalite.client("kinesis")
    summary = kinesis_generator.run(
        stream_name=stream,
        count=3000,
        rate=100_000,
        endpoint_url=kinesalite.endpoint_url,
        aggregate=True,
        partition_key="{{random.uuid}}",
        collect=True,
    )
    assert summary.records == 3000 and summary.kinesis_records < 300
    shards = {s["ShardId"]: s["HashKeyRange"] for s in kinesis.list_shards(StreamName=stream)["Shards"]}
    read: Counter[tuple[str, bytes]] = Counter()
    aggregated = 0
    for shard_id, hash_range in shards.items():
        for record in iterate_shard(kinesis, stream, shard_id):
            # A lone record (the first tick sends one) travels plain, as the KPL does.
            aggregated += is_aggregated(record["Data"])
            users = deaggregate(record["Data"]) if is_aggregated(record["Data"]) else [plain(record)]
            for user in users:
                # Each user record sits on the shard its own key hashes to.
                assert int(hash_range["StartingHashKey"]) <= hash_key_of(user.partition_key)
                assert hash_key_of(user.partition_key) <= int(hash_range["EndingHashKey"])
                read[user.partition_key, user.data] += 1
    assert_stored_as_reported(read, summary)
    assert aggregated >= summary.kinesis_records - 3


def plain(record: dict) -> UserRecord:
    return UserRecord(record["Data"], record["PartitionKey"], None, 0)


def test_bad_template_fails_before_sending(kinesalite: LocalServer, lite_stream):
    stream, endpoint = lite_stream(), kinesalite.endpoint_url
    with pytest.raises(kinesis_generator.TemplateError, match="line 1, column 9"):
        kinesis_generator.run(stream_name=stream, template='{"a": 1,{{random.numbr}}}', count=5, endpoint_url=endpoint)
    with pytest.raises(ValueError, match="partition key"):
        kinesis_generator.run(
            stream_name=stream, partition_key="{{random.alphaNumeric(300)}}", count=5, endpoint_url=endpoint
        )
    assert not stored(kinesalite, stream)


def test_missing_stream_stops_the_run_before_sending_with_the_generators_flags(kinesalite: LocalServer):
    missing = r"^--stream no-such-stream: no such stream"
    with (
        FaultProxy(kinesalite.endpoint_url) as proxy,
        pytest.raises(kinesis_generator.TargetError, match=missing) as raised,
    ):
        kinesis_generator.run(stream_name="no-such-stream", count=10, rate=1000, endpoint_url=proxy.endpoint_url)
    assert "--region" in str(raised.value) and "--endpoint-url" in str(raised.value)
    assert "kinesis." not in str(raised.value) and "retry of the task" not in str(raised.value)
    assert raised.value.summary is None and proxy.calls["PutRecords"] == 0


def test_a_failing_on_sent_callback_stops_the_run_with_its_error(kinesalite: LocalServer, lite_stream):
    def on_sent(users: list) -> None:
        raise RuntimeError("callback broke")

    with pytest.raises(RuntimeError, match="callback broke"):
        kinesis_generator.run(
            stream_name=lite_stream(), rate=1000, duration_s=30, client=kinesalite.client("kinesis"), on_sent=on_sent
        )


class _Clock:
    """The generator's time (``time.monotonic`` and ``time.sleep`` in ``kinesis_generator.sender``), moved by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class _Pool:
    def __init__(self) -> None:
        self.fatal = None
        self.deadline = type("Deadline", (), {"passed": staticmethod(lambda: False)})()
        self.ticks: list[int] = []

    def submit(self, users: list, aggregated: object) -> bool:
        self.ticks.append(len(users))
        return True


def test_a_high_rate_goes_out_in_ticks_of_a_tenth_of_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    """3,000 records/s for 2 s: about 20 ticks of ~300 records, each one PutRecords call; with 10 ms ticks it was
    200 calls of 30 records, and the sending thread's round trips held the rate under the shards' quota."""
    from kinesis_generator import sender
    from kinesis_generator.helpers import Context
    from kinesis_generator.rates import ConstantRate
    from kinesis_generator.template import Template

    clock, pool = _Clock(), _Pool()
    monkeypatch.setattr(sender, "time", clock)
    ctx = Context(1)
    content = (Template("{}", ctx), Template("k", ctx), None)
    sender._produce(ConstantRate(3000), 6000, 2.0, 0.0, content, pool, None)
    assert sum(pool.ticks) == 6000 and len(pool.ticks) <= 22, pool.ticks
    assert min(pool.ticks[1:-1]) >= 290, pool.ticks


def test_aggregates_fill_across_ticks_and_a_partial_one_waits_at_most_the_hold() -> None:
    """Ticks of 100 records of 1 KB: one full 256 KiB aggregate once ~260 have come, the rest after the hold or at
    the end (one aggregate a tick made ~150 KB aggregates at 3,000 records/s, six to a shard's 1 MiB second)."""
    from kinesis_generator import sender

    packer = sender._Packer([0])
    tick = [(f"k{i}", b"x" * 1000) for i in range(100)]
    assert packer.add(tick, 0.0, False) == [] and packer.add(tick, 0.1, False) == []
    (full,) = packer.add(tick, 0.2, False)
    assert 250 <= len(full[1]) < 300 and full[0].size <= sender.AGGREGATE_BYTES
    assert packer.add([], 0.3, False) == []  # the partial one opened at 0.2
    (held,) = packer.add([], 0.21 + sender.HOLD_S, False)
    assert len(full[1]) + len(held[1]) == 300 and [user for _, users in (full, held) for user in users] == tick * 3
    assert packer.add(tick[:5], 1.0, True)[0][1] == tick[:5]  # the end sends what is open


def test_a_stream_named_by_arn_is_written_by_arn(kinesis_mock: LocalServer, mock_stream):
    """``--stream`` takes an ARN too: every call names it (a stream another account shares is reached no other way)."""
    stream = mock_stream(shards=1)
    kinesis = kinesis_mock.client("kinesis")
    arn = kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["StreamARN"]
    summary = kinesis_generator.run(stream_name=arn, count=5, rate=1000, endpoint_url=kinesis_mock.endpoint_url)
    assert (summary.records, summary.failed) == (5, 0)
    assert len(read_stream(kinesis, stream)) == 5
