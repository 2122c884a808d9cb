"""How often the driver asks a busy shard, on a simulated clock checked against the quota proxy's model: with a
200 ms trigger 4 of every 5 triggers ask each busy shard (the rest of a second's 5 calls left to another reader),
never more than 4 calls in any second, so a neighbour polling once a second is never refused; all 5 when the
options declare the stream read by this query alone. Nothing here is timed: the clock moves only by hand."""

from __future__ import annotations

import base64
import itertools
import json
import math
import random
from dataclasses import dataclass, field

import pytest
from botocore.exceptions import ClientError

from localaws.quota_model import QuotaBook
from pyspark_aws_kinesis import clock as clock_module
from pyspark_aws_kinesis.aws.clients import RAW_BODY
from pyspark_aws_kinesis.fetch.iterators import Handoff
from pyspark_aws_kinesis.positions import AFTER_SEQUENCE_NUMBER, Position, shard_key
from pyspark_aws_kinesis.retry import RetryPolicy
from pyspark_aws_kinesis.source import probe as probe_module
from pyspark_aws_kinesis.source.probe import ShardProber
from pyspark_aws_kinesis.source.probe_answers import Found
from tests.connector.support.read_sim import START_S, NeighbourClock

STREAM = "s"
SHARDS = ("shardId-000000000000", "shardId-000000000001")


class SimTime(NeighbourClock):
    """The prober's monotonic and wall clocks on the quota model's hand-moved one (moved only by the test or the
    prober's sleep), a neighbour calling GetRecords on the first shard on the way."""

    def __init__(self) -> None:
        super().__init__((STREAM, SHARDS[0]))
        self._wall_ms = clock_module.now_ms()  # near the real time: iterators stamped with it stay fresh

    def monotonic(self) -> float:
        return self.t

    def time(self) -> float:
        return self.now_ms() / 1000

    def now_ms(self) -> int:
        return self._wall_ms + round((self.t - START_S) * 1000)


@dataclass
class BusyStream:
    """A fake reader client: every shard always has a new record; each call goes through the quota model."""

    time: SimTime
    book: QuotaBook
    calls: dict[str, list[float]] = field(default_factory=dict)  # shard id -> when ours were admitted
    refused: int = 0
    empty: bool = False  # the producer paused: answers without records
    limits: list[int] = field(default_factory=list)  # each call's Limit
    reads: int = 0  # calls made by batches' reads, not by the prober (``run_triggers(defer=True)``)

    def get_records(self, ShardIterator: str, Limit: int) -> dict:
        self.limits.append(Limit)
        shard_id, _sequence = ShardIterator.split(":")
        refusal = self.book.get_records((STREAM, shard_id))
        if refusal is not None:
            self.refused += 1
            raise ClientError({"Error": {"Code": refusal.code, "Message": refusal.message}}, "GetRecords")
        self.calls.setdefault(shard_id, []).append(self.time.t)
        sequence = str(len(self.calls[shard_id]))
        record = {
            "Data": base64.b64encode(b"x").decode(),
            "PartitionKey": "k",
            "SequenceNumber": sequence,
            "ApproximateArrivalTimestamp": self.time.now_ms() / 1000,
        }
        body = {
            "Records": [record] if self.has_record(shard_id) else [],
            "NextShardIterator": f"{shard_id}:{sequence}",
            "MillisBehindLatest": 0,
        }
        return {RAW_BODY: json.dumps(body).encode()}

    def has_record(self, shard_id: str) -> bool:
        """Whether this call's answer holds a record (subclasses decide per shard and time)."""
        return not self.empty


@pytest.fixture
def sim(monkeypatch: pytest.MonkeyPatch) -> SimTime:
    time = SimTime()
    monkeypatch.setattr(probe_module, "time", time)
    monkeypatch.setattr(probe_module, "now_ms", time.now_ms)
    monkeypatch.setattr(clock_module, "now_ms", time.now_ms)
    # never later than now, as clock.monotonic_at
    monkeypatch.setattr(probe_module, "monotonic_at", lambda at_ms: time.t - max(0, time.now_ms() - at_ms) / 1000)
    return time


READ_LEAD_S = 0.045  # from a trigger to its batch's first read: Spark's offset log, planning, the task's start
BATCH_S = 0.15  # from a trigger to its batch's end


def run_triggers(
    sim: SimTime,
    interval_s: float,
    trigger_s: float,
    seconds: float,
    neighbour_phase: float | None = None,
    defer: bool = False,
    stream: BusyStream | None = None,
    shards: tuple[str, ...] = SHARDS,
) -> tuple[BusyStream, int, int]:
    """Triggers every ``trigger_s`` (each 0-20 ms late) for ``seconds``, planned as the planner does: a probe that
    finds records plans a batch, whose read is the probe's held answer (no call) and ends at the tip, handing on the
    answer's iterator. ``defer``: a steady shard is planned without a probe (``ShardProber.deferred``) and its read
    makes the call, ``READ_LEAD_S`` after the trigger or once the shard's second has room, and a whole fetch interval
    after the shard's last call (the read's pacer). A neighbour calls GetRecords on the first shard once a second at
    ``neighbour_phase``. ``stream``: another fake than one whose every shard always has a new record, ``shards``
    its shards. Returns the stream, the triggers and the neighbour's refused calls."""
    stream = stream if stream is not None else BusyStream(sim, sim.book)
    prober = ShardProber(lambda: stream, RetryPolicy(max_retries=0), interval_s, busy_interval_s=0.2)
    keys = {shard_key(STREAM, shard_id): shard_id for shard_id in shards}
    positions = {key: Position(AFTER_SEQUENCE_NUMBER, "0") for key in keys}
    handoffs = {key: Handoff(positions[key], f"{shard_id}:0", sim.now_ms()) for key, shard_id in keys.items()}
    last_calls: dict[str, int] = {}
    jitter = random.Random(7)
    start, triggers = sim.t, round(seconds / trigger_s)
    if neighbour_phase is not None:
        sim.neighbour_from(neighbour_phase)
    for index in range(triggers):
        trigger = start + index * trigger_s + jitter.uniform(0.0, 0.02)
        sim.advance_to(trigger)
        deferred = prober.deferred(positions, handoffs) if defer else {}
        before = {key: prober.last_call_ms(key) for key in keys}
        results = prober.probe({key: at for key, at in positions.items() if key not in deferred}, None, handoffs)
        probed = [key for key in results if prober.last_call_ms(key) != before[key]]
        calls = {key: prober.last_call_ms(key) for key in probed if results[key].found is Found.DATA}
        for key, not_before_ms in sorted(deferred.items(), key=lambda item: item[1]):
            last_s = sim.t - (sim.now_ms() - max(last_calls.get(key, 0), before[key] or 0)) / 1000
            sim.advance_to(max(trigger + READ_LEAD_S, sim.t + (not_before_ms - sim.now_ms()) / 1000, last_s + 0.2))
            stream.get_records(ShardIterator=handoffs[key].iterator, Limit=100)
            stream.reads += 1
            calls[key] = sim.now_ms()
        if calls:
            sim.advance_to(max(sim.t, trigger + BATCH_S))  # the batch: its reads hand on their iterators
        for key, called in calls.items():
            assert called is not None
            shard_id = keys[key]
            positions[key] = Position(AFTER_SEQUENCE_NUMBER, str(len(stream.calls[shard_id])))
            handoffs[key] = Handoff(positions[key], f"{shard_id}:{positions[key].sequence_number}", called)
            prober.observed(key, positions[key], handoffs[key])
            prober.read_ended(key, positions[key], took_records=True)
            prober.read_called(key, called)
            last_calls[key] = called
    return stream, triggers, sim.neighbour_refused


def most_in_a_second(calls: list[float]) -> int:
    """The most calls admitted within any window of 1 s (as the quota model counts them)."""
    return max(sum(1 for other in calls if at - 1.0 < other <= at) for at in calls)


@pytest.mark.parametrize("neighbour_phase", [0.0, 0.005, 0.1, 0.41, 0.99])
def test_a_busy_shard_is_asked_at_4_of_5_triggers_and_a_neighbour_is_never_refused(
    sim: SimTime, neighbour_phase: float
) -> None:
    stream, triggers, neighbour_refused = run_triggers(sim, 1.0, 0.2, 10.0, neighbour_phase)
    assert neighbour_refused == 0 and stream.refused == 0
    assert sim.neighbour_calls >= 9  # it did call, every second of the 10 s (the 10th after the end if late)
    for calls in stream.calls.values():
        assert most_in_a_second(calls) == 4
        # 4 of 5 but for the 10 ms margin on the window: a trigger a few ms early for the 5th call waits for the 1st
        # to leave the second (without that wait, 36 of 50 here)
        assert len(calls) >= 0.74 * triggers
        gaps = [later - earlier for earlier, later in itertools.pairwise(calls)]
        assert max(gaps) < 0.65  # never three triggers in a row without a probe


def test_a_busy_shard_never_misses_two_triggers_in_a_row_over_two_minutes(sim: SimTime) -> None:
    """4 calls in any 1.01 s on a 200 ms grid: the 5th trigger after a call comes 10 ms too early for the next one,
    so now and then a call waits for the oldest to leave the shard's second. A wait of at most 30 ms left a shard
    unasked at two triggers in a row (a 600 ms gap, the p99's tail) 5 times in these two minutes."""
    stream, _triggers, _neighbour_refused = run_triggers(sim, 1.0, 0.2, 120.0)
    for calls in stream.calls.values():
        assert most_in_a_second(calls) == 4
        gaps = [later - earlier for earlier, later in itertools.pairwise(calls)]
        assert max(gaps) < 0.45 and len(calls) >= 0.75 * 600


def test_a_stream_read_alone_is_asked_at_every_200_ms_trigger_5_calls_a_second(sim: SimTime) -> None:
    stream, triggers, _neighbour_refused = run_triggers(sim, 0.2, 0.2, 10.0)
    assert stream.refused == 0
    for calls in stream.calls.values():
        assert most_in_a_second(calls) == 5
        assert len(calls) >= 0.85 * triggers  # all but a few, for the margin on the window


@pytest.mark.parametrize("neighbour_phase", [0.0, 0.1, 0.41, 0.99])
def test_a_steady_shard_read_without_probes_keeps_to_4_calls_a_second_beside_a_neighbour(
    sim: SimTime, neighbour_phase: float
) -> None:
    """Once steady, a shard is planned without a probe and its read makes the call, after Spark's own work or once
    the shard's second has room: the same 4 calls a second, the neighbour never refused."""
    stream, triggers, neighbour_refused = run_triggers(sim, 1.0, 0.2, 10.0, neighbour_phase, defer=True)
    assert neighbour_refused == 0 and stream.refused == 0 and sim.neighbour_calls >= 9
    assert stream.reads >= 2 * 0.65 * triggers  # the reads made the calls: the probes stopped after the first
    for calls in stream.calls.values():
        assert most_in_a_second(calls) == 4 and len(calls) >= 0.74 * triggers
        gaps = [later - earlier for earlier, later in itertools.pairwise(calls)]
        assert max(gaps) < 0.45  # never two triggers in a row without a call


def test_a_steady_shard_read_alone_without_probes_is_read_at_every_trigger(sim: SimTime) -> None:
    stream, triggers, _neighbour_refused = run_triggers(sim, 0.2, 0.2, 60.0, defer=True)
    assert stream.refused == 0 and stream.reads >= 2 * 0.85 * triggers
    for calls in stream.calls.values():
        assert most_in_a_second(calls) == 5 and len(calls) >= 0.9 * triggers


def test_short_triggers_do_not_bunch_a_busy_shards_calls(sim: SimTime) -> None:
    stream, _triggers, _neighbour_refused = run_triggers(sim, 1.0, 0.05, 10.0)
    assert stream.refused == 0
    for calls in stream.calls.values():
        assert most_in_a_second(calls) == 4 and len(calls) >= 36
        gaps = [later - earlier for earlier, later in itertools.pairwise(calls)]
        assert min(gaps) >= 0.175  # the fetch interval less an eighth: not 4 calls at once, then a second's wait


def test_a_reads_own_call_counts_in_the_shards_second_once(sim: SimTime) -> None:
    prober = ShardProber(lambda: None, RetryPolicy(), 1.0, busy_interval_s=0.2)
    key = shard_key(STREAM, SHARDS[0])
    for offset_ms in (0, 300, 300, 600):  # the same call named twice (a read made of a probe's answer) counts once
        prober.read_called(key, sim.now_ms() - 900 + offset_ms)
    assert prober.calls_within_window(key, sim.t) == 3
    sim.t += 0.15
    assert prober.calls_within_window(key, sim.t) == 2  # the first left the second


MiB = 1024 * 1024


@dataclass
class LargeRecordStream(BusyStream):
    """Every answer holds one record of ``record_bytes``, charged to the shard's read quota when admitted (as the
    quota proxy does)."""

    record_bytes: int = 3 * MiB

    def get_records(self, ShardIterator: str, Limit: int) -> dict:
        answer = super().get_records(ShardIterator=ShardIterator, Limit=Limit)
        body = json.loads(answer[RAW_BODY])
        body["Records"][0]["Data"] = base64.b64encode(b"L" * (self.record_bytes - 1)).decode()  # + the key's byte
        self.book.charge_read((STREAM, ShardIterator.split(":")[0]), self.record_bytes)
        return {RAW_BODY: json.dumps(body).encode()}


def probe_every(sim: SimTime, prober: ShardProber, key: str, position: Position, seconds: float) -> None:
    """Triggers every 200 ms for ``seconds``, each asking the prober about ``key`` at ``position``."""
    handoff = Handoff(position, f"{SHARDS[0]}:{position.sequence_number}", sim.now_ms())
    for index in range(round(seconds / 0.2)):
        sim.advance_to(START_S + 10.0 + index * 0.2)
        prober.probe({key: position}, None, {key: handoff})


def test_a_probes_large_answer_holds_the_shards_next_probe_until_it_is_paid_back(sim: SimTime) -> None:
    """A busy shard's probes bring 3 MiB each (records raised to 10 MiB): each is paid back 1.5 s after its call,
    and the next waits for that instead of coming at the busy pace and being refused (the quota model refuses
    while the shard owes more than a second)."""
    stream = LargeRecordStream(sim, sim.book)
    prober = ShardProber(lambda: stream, RetryPolicy(max_retries=0), 1.0, busy_interval_s=0.2)
    probe_every(sim, prober, shard_key(STREAM, SHARDS[0]), Position(AFTER_SEQUENCE_NUMBER, "0"), 6.0)
    admitted = stream.calls[SHARDS[0]]
    assert stream.refused == 0 and len(admitted) >= 3
    assert all(later - earlier >= 1.5 for earlier, later in itertools.pairwise(admitted))


def test_a_reads_large_answer_heard_by_the_planner_holds_the_shards_probes_until_it_is_paid_back(sim: SimTime) -> None:
    """A batch's read (in an executor) took a 5 MiB answer: the planner hands the prober the read's pay-back
    (``ShardRead.paid_ms``), and no probe of the shard comes before the shard owes at most a second (AWS refuses
    every reader of the shard until then), nor before the read's pay-back."""
    stream = BusyStream(sim, sim.book)
    prober = ShardProber(lambda: stream, RetryPolicy(max_retries=0), 1.0, busy_interval_s=0.2)
    key, position = shard_key(STREAM, SHARDS[0]), Position(AFTER_SEQUENCE_NUMBER, "1")
    sim.advance_to(START_S + 10.0)
    called_ms = sim.now_ms()
    sim.book.charge_read((STREAM, SHARDS[0]), 5 * MiB)
    prober.read_called(key, called_ms)
    prober.read_paid(key, called_ms + 2500)
    prober.read_ended(key, position, took_records=True)
    probe_every(sim, prober, key, position, 4.0)
    admitted = stream.calls[SHARDS[0]]
    assert stream.refused == 0 and admitted and admitted[0] >= START_S + 10.0 + 2.5


def test_a_busy_shard_planned_from_its_reads_keeps_only_the_calls_that_may_still_count(sim: SimTime) -> None:
    """A busy shard's read stops at the batch's bound and the next batch plans it from that read, without a probe
    and so without a look at its second's room: over 2,000 batches (two calls each, four batches a second) the
    driver keeps its last seconds' calls, not all 4,000 (it kept them all, and looked through them at every call)."""
    prober = ShardProber(lambda: None, RetryPolicy(), 1.0, busy_interval_s=0.2)
    key = shard_key(STREAM, SHARDS[0])
    start = sim.t
    for batch in range(2000):
        for call in range(2):
            sim.advance_to(start + batch * 0.25 + call * 0.1)
            prober.read_called(key, sim.now_ms())
    assert prober.windows.held(key) <= 20
    sim.advance_to(start + 499.9)
    assert prober.calls_within_window(key, sim.t) == 8  # the last second's, from 499.0 s to 499.85 s


def test_a_shard_that_just_went_idle_keeps_to_its_second_too(sim: SimTime) -> None:
    stream = BusyStream(sim, sim.book)
    prober = ShardProber(lambda: stream, RetryPolicy(max_retries=0), 0.2, busy_interval_s=0.2)
    key = shard_key(STREAM, SHARDS[0])
    position = Position(AFTER_SEQUENCE_NUMBER, "0")
    for ago_ms in (900, 700, 500, 300, 100):  # a busy second: the stream read alone, 5 calls
        prober.read_called(key, sim.now_ms() - ago_ms)
    prober.observed(key, position, Handoff(position, f"{SHARDS[0]}:0", sim.now_ms() - 300))  # then at the tip
    assert prober.probe({key: position})[key].found is Found.NOTHING  # the read's answer stands
    assert stream.calls == {}  # idle and a probe interval old, but a 6th call in the second: not asked
    sim.advance_to(sim.t + 0.11)
    prober.probe({key: position})
    assert len(stream.calls[SHARDS[0]]) == 1  # the oldest call left the second (and its 10 ms margin)


def test_a_busy_shard_whose_probe_found_nothing_is_asked_again_sooner_than_an_idle_one(sim: SimTime) -> None:
    """A probe between two puts (the producer paused) must not leave the next records a whole second to wait."""
    stream = BusyStream(sim, sim.book)
    prober = ShardProber(lambda: stream, RetryPolicy(max_retries=0), 1.0, busy_interval_s=0.2)
    key = shard_key(STREAM, SHARDS[0])
    first, after = Position(AFTER_SEQUENCE_NUMBER, "0"), Position(AFTER_SEQUENCE_NUMBER, "1")
    prober.probe({key: first}, None, {key: Handoff(first, f"{SHARDS[0]}:0", sim.now_ms())})
    stream.empty = True
    handoffs = {key: Handoff(after, f"{SHARDS[0]}:1", sim.now_ms())}  # a read took the record: busy there
    for _trigger in range(100):  # 5 s of 50 ms triggers
        sim.advance_to(sim.t + 0.05)
        prober.probe({key: after}, None, handoffs)
    calls = stream.calls[SHARDS[0]][1:]
    gaps = [round(later - earlier, 2) for earlier, later in itertools.pairwise(calls)]
    # twice the busy interval, four times (at the first 50 ms trigger after each), then idle: at the shard's turn
    # of the probe interval, half an interval or more after the last, then the probe interval
    assert gaps[:2] == pytest.approx([0.35, 0.7], abs=0.051) and 0.5 <= gaps[2] <= 1.55
    assert gaps[3:] == pytest.approx([1.0] * len(gaps[3:]), abs=0.051) and len(gaps) >= 5


def test_a_forgotten_shard_forgets_its_record_size_too(sim: SimTime) -> None:
    """The prober sizes a probe's Limit by the mean size its earlier probes saw; a shard it forgets (no longer read,
    after a reshard) leaves nothing behind: a driver running for months keeps no state per departed shard."""
    stream = BusyStream(sim, sim.book)
    prober = ShardProber(lambda: stream, RetryPolicy(max_retries=0), 1.0, busy_interval_s=0.2)
    key = shard_key(STREAM, SHARDS[0])
    for sequence in ("0", "1"):
        position = Position(AFTER_SEQUENCE_NUMBER, sequence)
        prober.probe({key: position}, None, {key: Handoff(position, f"{SHARDS[0]}:{sequence}", sim.now_ms())})
        sim.advance_to(sim.t + 1.0)
    assert stream.limits[0] == 1 and stream.limits[1] > 1  # the first answer taught the size
    prober.forget(set())
    position = Position(AFTER_SEQUENCE_NUMBER, "2")
    prober.probe({key: position}, None, {key: Handoff(position, f"{SHARDS[0]}:2", sim.now_ms())})
    assert stream.limits[2] == 1  # nothing known of the shard any more


FOUR_SHARDS = tuple(f"shardId-{index:012d}" for index in range(4))


def test_the_idle_shards_of_a_stream_take_turns_once_a_probe_interval_each(sim: SimTime) -> None:
    """Idle, each shard is asked once a probe interval (0.5 to 1.5 intervals apart), at its own turn: the stream's
    four shards are asked at four moments of the interval, not all at one trigger, so whichever shard a producer's
    first records reach, one of its shards is asked within about a quarter of the interval."""
    idle = BusyStream(sim, sim.book, empty=True)
    run_triggers(sim, 1.0, 0.2, 20.0, stream=idle, shards=FOUR_SHARDS)
    for calls in idle.calls.values():
        gaps = [later - earlier for earlier, later in itertools.pairwise(calls)]
        assert 19 <= len(calls) <= 21 and min(gaps) >= 0.5 and max(gaps) <= 1.5 + 0.2 + 0.02  # a turn, a trigger
    asked = sorted(at for calls in idle.calls.values() for at in calls if at > START_S + 2.0)
    assert max(later - earlier for earlier, later in itertools.pairwise(asked)) <= 0.25 + 0.2 + 0.02


@dataclass
class StartingStream(BusyStream):
    """No records until ``starts_at``, then a new one on every shard at every call; when each shard's first came."""

    starts_at: float = 0.0
    found_at: dict[str, float] = field(default_factory=dict)

    def has_record(self, shard_id: str) -> bool:
        if self.time.t < self.starts_at:
            return False
        self.found_at.setdefault(shard_id, self.time.t)
        return True


@pytest.mark.parametrize("starts_after_s", [3.0, 3.33, 3.61, 3.9])
def test_records_on_an_idle_stream_found_on_one_shard_have_the_others_asked_at_once(
    sim: SimTime, starts_after_s: float
) -> None:
    starting = StartingStream(sim, sim.book, starts_at=START_S + starts_after_s)
    run_triggers(sim, 1.0, 0.2, 6.0, stream=starting, shards=FOUR_SHARDS)
    assert set(starting.found_at) == set(FOUR_SHARDS)
    found = set(starting.found_at.values())
    assert len(found) == 1  # at one trigger: the first shard whose turn came, and the others woken by it
    assert found.pop() - starting.starts_at <= 0.25 + 0.2 + 0.02  # within a turn (and a trigger) of the start


@dataclass
class FlickeringStream(BusyStream):
    """A record on the first shard every ``every_s`` (taken by the call that finds it), none on the others ever: the
    stream goes from idle to busy over and over."""

    every_s: float = 0.4
    last_given: float = -1.0

    def has_record(self, shard_id: str) -> bool:
        if shard_id != FOUR_SHARDS[0] or self.time.t - self.last_given < self.every_s:
            return False
        self.last_given = self.time.t
        return True


def test_a_stream_that_keeps_starting_wakes_its_idle_shards_at_most_once_a_probe_interval(sim: SimTime) -> None:
    flickering = FlickeringStream(sim, sim.book)
    run_triggers(sim, 1.0, 0.2, 30.0, stream=flickering, shards=FOUR_SHARDS)
    assert flickering.refused == 0
    for shard_id in FOUR_SHARDS[1:]:  # each idle shard: its turn, and a wake-up once a second at the most (a wake
        # that comes shortly before its turn stands for it: 31-32 calls here; woken at every start, 50)
        assert 28 <= len(flickering.calls[shard_id]) <= 1.5 * 30


def test_a_wake_up_cut_short_by_the_probes_per_trigger_leaves_the_shards_it_did_not_ask_unwoken(sim: SimTime) -> None:
    """With ``kinesis.maxProbesPerTrigger`` 2, the trigger whose probe finds a producer's first records asks one
    more shard of the stream; the others were not asked, so they do not count as woken (a shard is woken at most
    once a probe interval: a stamp without a call would hold back their next wake-up)."""
    starting = StartingStream(sim, sim.book, starts_at=START_S + 3.1)
    prober = ShardProber(lambda: starting, RetryPolicy(max_retries=0), 1.0, busy_interval_s=0.2, max_asks=2)
    keys = {shard_key(STREAM, shard_id): shard_id for shard_id in FOUR_SHARDS}
    positions = {key: Position(AFTER_SEQUENCE_NUMBER, "0") for key in keys}
    handoffs = {key: Handoff(positions[key], f"{shard_id}:0", sim.now_ms()) for key, shard_id in keys.items()}
    while not starting.found_at:
        sim.advance_to(sim.t + 0.2)
        prober.probe(positions, None, handoffs)
    asked = {key for key, shard_id in keys.items() if starting.calls.get(shard_id, [0.0])[-1] == sim.t}
    assert len(asked) == 2 and len(starting.found_at) == 2  # the shard whose turn came, and one woken
    unasked = [prober._states[key] for key in keys if key not in asked]
    assert [state.woken_at for state in unasked] == [-math.inf, -math.inf]
