"""The GetRecords transport within a shard's read quota, behind the quota-enforcing proxy (``localaws.quota_proxy``)
or on a simulated clock against its model: a refused read backs off and reads every record, a backlog is read
within the byte quota, and each call keeps the interval after the last call on the shard, made in this process,
another one or by the driver's probe. Counts only, no timings. The same through the whole source:
tests/connector/queries/test_source_quotas.py."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from localaws import LocalServer
from localaws.quota_model import Quotas
from localaws.quota_proxy import QuotaProxy
from localaws.streams import put_records, set_max_record_size
from pyspark_aws_kinesis import clock as wall_clock
from pyspark_aws_kinesis.aws.clients import RAW_BODY, kinesis_reader_client
from pyspark_aws_kinesis.clock import now_ms
from pyspark_aws_kinesis.fetch.decode import Page, ShardContext
from pyspark_aws_kinesis.fetch.iterators import Handoff, HeldAnswer
from pyspark_aws_kinesis.fetch.polling.memory import ShardMemory
from pyspark_aws_kinesis.fetch.polling.pacing import CallPacer
from pyspark_aws_kinesis.fetch.polling.settings import FIRST_CALL_LIMIT, PollingSettings
from pyspark_aws_kinesis.fetch.polling.transport import GetRecordsTransport
from pyspark_aws_kinesis.fetch.range import FetchLimits, ShardRange, ShardTask
from pyspark_aws_kinesis.fetch.reads import STOP_CAUGHT_UP
from pyspark_aws_kinesis.positions import TRIM_HORIZON, Position
from pyspark_aws_kinesis.record_sizes import SHARD_READ_BYTES_PER_S
from pyspark_aws_kinesis.retry import RetryPolicy
from pyspark_aws_kinesis.shards import MAX_HASH_KEY, list_shards
from tests.connector.fetch.polling.polling_util import (
    INTERVAL_S,
    SimulatedClock,
    _read_range,
    _reader_client,
    _shard_with,
)
from tests.connector.support.read_quotas_util import ONE_CALL_A_SECOND
from tests.connector.support.read_sim import NeighbourClock
from tests.connector.support.source_util import client_settings

NO_RETRIES = RetryPolicy(max_retries=0, initial_interval_ms=1, max_interval_ms=1)  # a refusal is never retried here


@pytest.fixture
def strict_proxy(kinesalite: LocalServer) -> Iterator[QuotaProxy]:
    """The session's kinesalite behind a quota of one GetRecords per second per shard."""
    with QuotaProxy(kinesalite.endpoint_url, ONE_CALL_A_SECOND) as proxy:
        yield proxy


@pytest.mark.slow
def test_a_read_refused_for_the_quota_backs_off_and_reads_every_record(
    kinesalite: LocalServer, lite_stream, strict_proxy: QuotaProxy
) -> None:
    context, sequences = _shard_with(kinesalite, lite_stream, 20)
    kinesis = kinesis_reader_client(client_settings(strict_proxy))
    transport = GetRecordsTransport(kinesis, context, NO_RETRIES, PollingSettings(5, 0.0))  # asks as fast as it can
    rows, result = _read_range(transport, context, Position(TRIM_HORIZON))
    assert rows == sequences and result.stop == STOP_CAUGHT_UP
    reads = strict_proxy.report().tally(stream=context.stream_name, action="GetRecords")
    assert reads.refused >= 1 and result.refused_calls == transport.refused_calls == reads.refused
    assert reads.refused <= reads.calls - reads.refused  # no busy retries: after each refusal, a call got through
    assert result.to_json()["refusedCalls"] == reads.refused


def _read_answers(transport: GetRecordsTransport, context: ShardContext, start: Position, limits: FetchLimits):
    """The rows of one range read, the answers (pages) it took, and its result."""
    task = ShardTask(context.stream_name, context.shard_id, context.starting_hash_key, context.ending_hash_key, start)
    shard_range = ShardRange(task, limits, context)
    rows: list[str] = []
    pages: list[Page] = []
    for page, first, stop in shard_range.slices(transport):
        rows += page.sequences[first:stop]
        if not pages or pages[-1] is not page:
            pages.append(page)
    assert shard_range.result is not None
    return rows, pages, shard_range.result


@pytest.mark.slow
def test_a_backlog_is_read_within_the_byte_quota_without_refusals(kinesalite: LocalServer, lite_stream) -> None:
    """AWS's quotas (2 MiB/s per shard, paid back before the next call): a 3 MiB backlog of 25 KiB records is read
    to the end by two reads in a row (two micro-batches), each answer within the byte budget of one call interval
    (+ one record), the second read waiting for the first's answers to be paid back: almost never refused."""
    stream = lite_stream(shards=1)
    setup = kinesalite.client("kinesis")
    size, count = 25 * 1024, 120
    sequences: list[str] = []
    for first in range(0, count, 40):  # PutRecords takes at most 5 MiB a call
        batch = [(bytes([i % 256]) * (size - 4), f"k{i:03d}") for i in range(first, first + 40)]
        sequences += [entry["SequenceNumber"] for entry in put_records(setup, stream, batch)]
    shard = list_shards(setup, stream)[0]
    context = ShardContext(stream, shard.shard_id, shard.starting_hash_key, shard.ending_hash_key)
    settings = PollingSettings(10000, INTERVAL_S, FIRST_CALL_LIMIT)  # the source's defaults
    with QuotaProxy(kinesalite.endpoint_url, Quotas()) as proxy:
        kinesis = kinesis_reader_client(client_settings(proxy))
        first = GetRecordsTransport(kinesis, context, NO_RETRIES, settings)
        rows, pages, result = _read_answers(first, context, Position(TRIM_HORIZON), FetchLimits(max_records=50))
        second = GetRecordsTransport(kinesis, context, NO_RETRIES, settings)  # the next batch's, at once
        more, later, result = _read_answers(second, context, result.next_start(), FetchLimits())
        reads = proxy.report().tally(stream=stream, action="GetRecords")
    assert rows + more == sequences and result.stop == STOP_CAUGHT_UP
    answers = [page.kinesis_bytes for page in pages + later]
    assert reads.bytes == sum(answers) == count * size  # the proxy counted what the pages say
    assert max(answers) <= settings.call_budget_bytes + size, answers
    assert len(answers) >= count * size // settings.call_budget_bytes  # many answers, not one big one
    assert reads.refused <= 0.02 * reads.calls and first.refused_calls + second.refused_calls == reads.refused


def test_a_large_record_among_small_ones_is_read_and_paid_back_before_the_next_call(
    kinesis_mock: LocalServer, mock_stream
) -> None:
    """A stream raised to 4 MiB records (kinesis-mock behind AWS's quotas): small records, one of 3 MiB, small
    records. The answer holding the large record puts the shard 1.5 s in debt; the next call waits until it is
    paid back instead of being refused (a refused call would be refused to every reader of the shard), and the
    read's result tells the driver when that is (``paid_ms``), so that its next probe waits for it too."""
    stream = mock_stream(shards=1)
    setup = kinesis_mock.client("kinesis")
    set_max_record_size(setup, stream, 4096)
    small = [(bytes([i]) * 1024, f"k{i}") for i in range(20)]
    sequences = [entry["SequenceNumber"] for entry in put_records(setup, stream, small)]
    sequences += [entry["SequenceNumber"] for entry in put_records(setup, stream, [(b"L" * (3 << 20), "large")])]
    sequences += [entry["SequenceNumber"] for entry in put_records(setup, stream, small)]
    shard = list_shards(setup, stream)[0]
    context = ShardContext(stream, shard.shard_id, shard.starting_hash_key, shard.ending_hash_key)
    with QuotaProxy(kinesis_mock.endpoint_url, Quotas()) as proxy:
        kinesis = kinesis_reader_client(client_settings(proxy))
        transport = GetRecordsTransport(kinesis, context, NO_RETRIES, PollingSettings(10000, INTERVAL_S, 10))
        rows, pages, result = _read_answers(transport, context, Position(TRIM_HORIZON), FetchLimits())
        reads = proxy.report().tally(stream=stream, action="GetRecords")
    assert rows == sequences and result.stop == STOP_CAUGHT_UP
    large = max(pages, key=lambda page: page.kinesis_bytes)
    assert large.kinesis_bytes >= 3 << 20 and reads.refused == transport.refused_calls == 0
    assert large.called_ms is not None and result.paid_ms is not None
    assert result.paid_ms >= large.called_ms + 1500  # 3 MiB at 2 MiB/s, from the call's start at the earliest


def _wall_clock_stands_at(monkeypatch: pytest.MonkeyPatch, at_ms: int) -> None:
    """Wall time stands still at ``at_ms`` where the read turns a stamp into a wait (``clock.monotonic_at``), as
    the simulated clock stands still for its waits: a loaded machine's delay before the read starts must not age
    the stamp past the interval."""
    monkeypatch.setattr(wall_clock, "now_ms", lambda: at_ms)


def test_a_read_handed_an_iterator_waits_an_interval_after_the_call_that_got_it(
    kinesalite: LocalServer, lite_stream, monkeypatch: pytest.MonkeyPatch
) -> None:
    context, sequences = _shard_with(kinesalite, lite_stream, 3)
    kinesis = _reader_client(kinesalite)
    start = Position(TRIM_HORIZON)
    iterator = kinesis.get_shard_iterator(
        StreamName=context.stream_name, ShardId=context.shard_id, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    clock = SimulatedClock()
    handoff = Handoff.received(start, iterator)  # a probe's, just now
    _wall_clock_stands_at(monkeypatch, handoff.at_ms)
    transport = GetRecordsTransport(kinesis, context, RetryPolicy(), PollingSettings(10, INTERVAL_S), handoff)
    transport.pacer = CallPacer(INTERVAL_S, clock, clock.sleep)
    rows, _result = _read_range(transport, context, start)
    assert rows == sequences
    assert len(clock.sleeps) == 1 and clock.sleeps[0] > INTERVAL_S / 2  # the probe's call counted


def test_a_read_keeps_the_interval_after_the_last_batchs_last_call_made_in_another_process(
    kinesalite: LocalServer, lite_stream, monkeypatch: pytest.MonkeyPatch
) -> None:
    context, sequences = _shard_with(kinesalite, lite_stream, 3)
    kinesis, start = _reader_client(kinesalite), Position(TRIM_HORIZON)
    sleeps = []
    for last_call_ms in (None, now_ms()):  # none known, then the last batch's read called just now
        if last_call_ms is not None:
            _wall_clock_stands_at(monkeypatch, last_call_ms)
        clock = SimulatedClock()
        settings = PollingSettings(10, INTERVAL_S)
        transport = GetRecordsTransport(kinesis, context, RetryPolicy(), settings, last_call_ms=last_call_ms)
        transport.memory = ShardMemory()  # this process never read the shard: only the task says when it was
        transport.pacer = CallPacer(INTERVAL_S, clock, clock.sleep)
        rows, _result = _read_range(transport, context, start)
        assert rows == sequences
        sleeps.append(clock.sleeps)
    assert sleeps[0] == []  # the first call at once
    assert len(sleeps[1]) == 1 and sleeps[1][0] > INTERVAL_S / 2  # the other process's call counted


class SharedShard:
    """One shard behind the quota proxy's rules on a hand-moved clock shared with a neighbour (``NeighbourClock``:
    polling the shard once a second, ``neighbour_phase_s`` after ours start, taking ``NEIGHBOUR_BYTES`` each time, as
    AWS Lambda does), with a backlog of ``record_bytes`` records that never ends: each GetRecords reaches the book
    half its ``round_trip_s`` after it starts (admitted or refused there, its bytes charged then) and answers at the
    end of it."""

    NEIGHBOUR_BYTES = 64 * 1024
    SHARD = ("s", "shardId-000000000000")

    def __init__(self, record_bytes: int, round_trip_s: float, neighbour_phase_s: float):
        self.clock = NeighbourClock(self.SHARD, self.NEIGHBOUR_BYTES)
        self.clock.neighbour_from(neighbour_phase_s)
        self.book = self.clock.book
        self.record_bytes, self.round_trip_s = record_bytes, round_trip_s
        self.ours: list[tuple[float, int]] = []  # (start, bytes) of our calls that got through
        self.refused = 0  # our calls refused
        self._bodies: dict[int, bytes] = {}

    def get_records(self, ShardIterator: str, Limit: int) -> dict[str, Any]:
        started = self.clock.now()
        self.clock.sleep(self.round_trip_s / 2)
        refusal = self.book.get_records(self.SHARD)
        if refusal is not None:
            self.refused += 1
            self.clock.sleep(self.round_trip_s / 2)
            raise ClientError({"Error": {"Code": refusal.code, "Message": refusal.message}}, "GetRecords")
        self.book.charge_read(self.SHARD, Limit * self.record_bytes)
        self.ours.append((started, Limit * self.record_bytes))
        self.clock.sleep(self.round_trip_s / 2)
        return {RAW_BODY: self._body(Limit)}

    def get_shard_iterator(self, **_kwargs: Any) -> dict[str, Any]:
        return {"ShardIterator": "it"}

    def _body(self, records: int) -> bytes:
        if records not in self._bodies:
            data = base64.b64encode(b"x" * (self.record_bytes - 1)).decode()
            wire = [{"Data": data, "PartitionKey": "k", "SequenceNumber": str(10**20 + i)} for i in range(records)]
            answer = {"Records": wire, "NextShardIterator": "it", "MillisBehindLatest": 60_000}
            self._bodies[records] = json.dumps(answer).encode()
        return self._bodies[records]


@pytest.mark.parametrize(
    ("record_bytes", "round_trip_s", "neighbour_phase_s"),
    [(1024, 0.02, 0.13), (1024, 0.1, 0.55), (1024, 0.2, 0.9), (25 * 1024, 0.06, 0.33), (100, 0.05, 0.71)],
)
def test_a_backlog_read_takes_the_shards_2_mib_a_second_in_4_calls_leaving_a_neighbour_its_call(
    record_bytes: int, round_trip_s: float, neighbour_phase_s: float
) -> None:
    """A steady backlog read against the proxy's rules on a simulated clock: the answers' bytes count from each
    call's start, not from its answer, so the read takes >= 95 % of 2 MiB/s whatever the round trip (counted from
    the answer: 2 MiB/s x 0.2 s / (0.2 s + round trip)), in at most 4 calls in any second, none refused; a reader
    polling the shard once a second beside it is never refused either."""
    shard = SharedShard(record_bytes, round_trip_s, neighbour_phase_s)
    context = ShardContext(shard.SHARD[0], shard.SHARD[1], 0, MAX_HASH_KEY)
    transport = GetRecordsTransport(shard, context, NO_RETRIES, PollingSettings(10000, INTERVAL_S, FIRST_CALL_LIMIT))
    transport.memory = ShardMemory()  # the record size is learnt from the first answer, as in a fresh worker
    transport.pacer = CallPacer(INTERVAL_S, shard.clock.now, shard.clock.sleep)
    begin, span_s = shard.clock.now() + 2.0, 20.0  # after the first answers taught the record size
    for _page in transport.pages(Position(TRIM_HORIZON), lambda: None):
        if shard.ours[-1][0] >= begin + span_s + 1.0:
            break
    counted = [(start, nbytes) for start, nbytes in shard.ours if begin <= start < begin + span_s]
    assert shard.refused == 0 and shard.clock.neighbour_refused == 0 and shard.clock.neighbour_calls >= span_s
    assert sum(nbytes for _, nbytes in counted) / span_s >= 0.95 * SHARD_READ_BYTES_PER_S
    starts = [start for start, _ in shard.ours]
    assert all(later - earlier >= 1.0 for earlier, later in zip(starts, starts[4:], strict=False))  # <= 4 a second


def test_a_probes_answer_taken_as_the_first_page_is_paid_back_from_the_probes_call() -> None:
    """The probe's answer was charged to the shard when the probe got it, not when the task takes it: a read
    handed a quarter second's worth from a probe called 300 ms ago makes its next call at once (counted from the
    task's taking it, it waited another 250 ms)."""
    shard = SharedShard(1024, 0.02, neighbour_phase_s=100.0)  # no neighbour
    context = ShardContext(shard.SHARD[0], shard.SHARD[1], 0, MAX_HASH_KEY)
    start = Position(TRIM_HORIZON)
    records = int(SHARD_READ_BYTES_PER_S * 0.25) // 1024
    held = HeldAnswer(start, shard._body(records), records, now_ms() - 300)
    task = ShardTask(context.stream_name, context.shard_id, 0, MAX_HASH_KEY, start, 2 * records, held=held)
    transport = GetRecordsTransport(shard, context, NO_RETRIES, PollingSettings(10000, INTERVAL_S), held=held)
    transport.memory = ShardMemory()
    transport.pacer = CallPacer(INTERVAL_S, shard.clock.now, shard.clock.sleep)
    taken_at = shard.clock.now()
    rows = sum(stop - first for _page, first, stop in ShardRange(task, FetchLimits(), context).slices(transport))
    assert shard.ours[0][0] - taken_at < 0.05  # at once (the wall clock moved a few ms meanwhile)
    assert rows == 2 * records and shard.refused == 0
