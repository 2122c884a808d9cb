"""The SubscribeToShard transport (``pyspark_aws_kinesis.fetch.fanout.subscriber``) on kinesis-mock: records exactly
from a position (KPL aggregates included), LATEST / TRIM_HORIZON / AT_TIMESTAMP, resubscription after the event
stream ends, injected ResourceInUse and throttling with nothing lost, both initial-response shapes, and sockets
released."""

from __future__ import annotations

import time
from contextlib import closing

import pytest
from botocore.eventstream import EventStreamBuffer

from localaws import LocalServer, aws_client
from localaws.fault_proxy import FaultProxy, Faults, encode_event
from localaws.quota_model import IN_USE
from localaws.quota_proxy import QuotaProxy
from localaws.streams import list_shard_ids, put_records
from pyspark_aws_kinesis.fetch.fanout.subscriber import (
    INITIAL_RESPONSE,
    RAW_EVENT_STREAM,
    SubscribePacer,
    SubscriptionError,
    starting_position,
)
from pyspark_aws_kinesis.kpl import Aggregator
from pyspark_aws_kinesis.positions import (
    AFTER_SEQUENCE_NUMBER,
    AT_SEQUENCE_NUMBER,
    AT_TIMESTAMP,
    LATEST,
    TRIM_HORIZON,
    Position,
)
from pyspark_aws_kinesis.retry import RetryPolicy
from tests.connector.support.efo_util import (
    FAST,
    SHARD0,
    SUBSCRIBE,
    _put,
    active_consumer,
    data,
    kinesis,
    pages_until,
    read_to_tip,
    rows,
    sockets_to,
    subscriber,
)

# -- no server --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("position", "expected"),
    [
        (Position(TRIM_HORIZON), {"Type": "TRIM_HORIZON"}),
        (Position(LATEST), {"Type": "LATEST"}),
        (Position(AT_TIMESTAMP, timestamp_ms=1_700_000_000_123), {"Type": "AT_TIMESTAMP", "Timestamp": 1700000000.123}),
        (Position(AT_SEQUENCE_NUMBER, "42", 0), {"Type": "AT_SEQUENCE_NUMBER", "SequenceNumber": "42"}),
        (Position(AFTER_SEQUENCE_NUMBER, "42"), {"Type": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": "42"}),
        # Inside a KPL aggregate: re-read the whole record (the range reader skips the sub-records it has).
        (Position(AFTER_SEQUENCE_NUMBER, "42", 3), {"Type": "AT_SEQUENCE_NUMBER", "SequenceNumber": "42"}),
    ],
)
def test_starting_position_maps_every_position_kind(position: Position, expected: dict) -> None:
    assert starting_position(position) == expected


def test_the_subscribe_pacer_holds_only_the_shards_called_lately_over_reshards() -> None:
    """The pacer is process-wide (a broker, a reused worker: months): 1,000 shards subscribed 10 at a time, each
    generation retired by the next reshard, leave only the last generation's entries, not one per shard ever
    called; an entry whose time has not come yet is kept."""
    now = [0.0]
    pacer = SubscribePacer(clock=lambda: now[0])

    def subscribed(shard: str) -> None:
        assert pacer.wait("arn", shard) == 0.0  # never called before, or long ago: goes at once
        pacer.answered("arn", shard)
        pacer.in_use("arn", shard)  # none within 5 s from now

    for generation in range(100):
        shards = [f"shardId-{generation * 10 + index:012d}" for index in range(10)]
        for shard in shards:
            subscribed(shard)
        now[0] += 60.0  # the next reshard: these shards were read to their ends and are never called again
    assert set(pacer._next) == {("arn", shard) for shard in shards}  # the last generation, before any later call
    subscribed("a")  # due 5 s from now
    now[0] += 4.0
    subscribed("b")  # due 5 s from now
    now[0] += 2.0  # "a" passed a second ago, "b" still 3 s to go
    subscribed("c")
    assert set(pacer._next) == {("arn", "b"), ("arn", "c")}


def test_the_stand_in_initial_response_is_what_aws_sends() -> None:
    """botocore reads our constant as an initial-response event, and it equals the proxy's own encoding."""
    buffer = EventStreamBuffer()
    buffer.add_data(INITIAL_RESPONSE)
    (message,) = list(buffer)
    assert message.headers == {":message-type": "event", ":event-type": "initial-response"}
    assert message.payload == b"{}"
    assert encode_event({":message-type": "event", ":event-type": "initial-response"}, b"{}") == INITIAL_RESPONSE


# -- kinesis-mock -----------------------------------------------------------------------------------------------


def test_reads_every_record_from_trim_horizon_through_subscribe_to_shard(kinesis_mock: LocalServer, efo) -> None:
    stream, consumer = efo
    produced = [f"r{i}".encode() for i in range(6)]
    sequences = _put(kinesis_mock, stream, produced)
    with FaultProxy(kinesis_mock.endpoint_url) as proxy:
        sub = subscriber(proxy.endpoint_url, consumer, stream, SHARD0)
        pages = read_to_tip(sub, Position(TRIM_HORIZON))
    assert [(row[0], row[2]) for row in rows(pages)] == list(zip(produced, sequences, strict=True))
    assert pages[-1].caught_up and sub.continuation is not None
    # Through SubscribeToShard, not GetRecords:
    assert proxy.calls["SubscribeToShard"] == sub.calls >= 1
    assert proxy.calls["GetRecords"] == proxy.calls["GetShardIterator"] == 0


@pytest.mark.slow
def test_reads_exactly_from_a_sequence_number(kinesis_mock: LocalServer, efo) -> None:
    stream, consumer = efo
    produced = [f"r{i}".encode() for i in range(5)]
    sequences = _put(kinesis_mock, stream, produced)
    sub = subscriber(kinesis_mock.endpoint_url, consumer, stream, SHARD0)
    at = read_to_tip(sub, Position(AT_SEQUENCE_NUMBER, sequences[2], 0))
    assert data(at) == produced[2:]
    # The next subscription may meet ResourceInUseException (the last one just closed): PATIENT retries it.
    after = read_to_tip(sub, Position(AFTER_SEQUENCE_NUMBER, sequences[2]))
    assert data(after) == produced[3:]


def test_inside_a_kpl_aggregate_the_whole_record_is_read_again(kinesis_mock: LocalServer, efo) -> None:
    stream, consumer = efo
    aggregator = Aggregator()
    for i in range(4):
        aggregator.add(f"u{i}".encode(), f"k{i}")
    aggregate = aggregator.flush()
    assert aggregate is not None
    kinesis = kinesis_mock.client("kinesis")
    put_records(kinesis, stream, [(b"plain-0", "p")])
    sequence = put_records(kinesis, stream, [(aggregate.data, aggregate.partition_key)])[0]["SequenceNumber"]
    put_records(kinesis, stream, [(b"plain-1", "p")])
    sub = subscriber(kinesis_mock.endpoint_url, consumer, stream, SHARD0)
    found = rows(read_to_tip(sub, Position(AFTER_SEQUENCE_NUMBER, sequence, 1)))
    assert [(row[0], row[2], row[3]) for row in found[:4]] == [(f"u{i}".encode(), sequence, i) for i in range(4)]
    assert [row[0] for row in found[4:]] == [b"plain-1"]


def test_latest_reads_only_what_arrives_after_subscribing(kinesis_mock: LocalServer, efo) -> None:
    stream, consumer = efo
    _put(kinesis_mock, stream, [b"old-0", b"old-1"])
    sub = subscriber(kinesis_mock.endpoint_url, consumer, stream, SHARD0)
    with closing(sub.pages(Position(LATEST))) as stream_pages:
        first = next(stream_pages)  # subscribed: the first event comes at the tip
        assert first.caught_up and len(first) == 0
        _put(kinesis_mock, stream, [b"new-0", b"new-1"])
        assert data(pages_until(stream_pages, 2)) == [b"new-0", b"new-1"]


def test_at_timestamp_starts_with_the_records_that_arrived_then(kinesis_mock: LocalServer, efo) -> None:
    stream, consumer = efo
    _put(kinesis_mock, stream, [b"before"])
    time.sleep(0.05)
    since_ms = int(time.time() * 1000)
    time.sleep(0.05)
    _put(kinesis_mock, stream, [b"after-0", b"after-1"])
    sub = subscriber(kinesis_mock.endpoint_url, consumer, stream, SHARD0)
    assert data(read_to_tip(sub, Position(AT_TIMESTAMP, timestamp_ms=since_ms))) == [b"after-0", b"after-1"]


@pytest.mark.slow
def test_resubscribes_from_the_continuation_when_the_event_stream_ends(kinesis_mock: LocalServer, efo) -> None:
    """Every subscription ends after one event (AWS: after 5 minutes); records put meanwhile come exactly once."""
    stream, consumer = efo
    first = [b"a0", b"a1"]
    _put(kinesis_mock, stream, first)
    with FaultProxy(kinesis_mock.endpoint_url, Faults(end_event_stream_after=1, actions=SUBSCRIBE)) as proxy:
        sub = subscriber(proxy.endpoint_url, consumer, stream, SHARD0)
        with closing(sub.pages(Position(TRIM_HORIZON))) as stream_pages:
            got = pages_until(stream_pages, 2)
            second = [b"b0", b"b1", b"b2"]
            _put(kinesis_mock, stream, second)  # while the first subscription is being cut
            got += pages_until(stream_pages, 3)
    assert data(got) == first + second
    assert proxy.stats["ended_event_streams"] >= 2 and sub.calls >= 2


@pytest.mark.parametrize(
    "initial_response",
    [pytest.param(False, id="kinesis-mock shape"), pytest.param(True, id="AWS shape", marks=pytest.mark.slow)],
)
def test_reads_with_and_without_an_initial_response(kinesis_mock: LocalServer, efo, initial_response: bool) -> None:
    stream, consumer = efo
    produced = [b"x0", b"x1", b"x2"]
    _put(kinesis_mock, stream, produced)
    faults = Faults(initial_response=initial_response, actions=SUBSCRIBE)
    with FaultProxy(kinesis_mock.endpoint_url, faults) as proxy:
        sub = subscriber(proxy.endpoint_url, consumer, stream, SHARD0)
        assert data(read_to_tip(sub, Position(TRIM_HORIZON))) == produced
        if initial_response:  # the proxy's AWS shape is what botocore itself expects
            other = active_consumer(kinesis_mock.endpoint_url, stream, "plain-botocore")
            answer = aws_client("kinesis", proxy.endpoint_url).subscribe_to_shard(
                ConsumerARN=other.arn, ShardId=SHARD0, StartingPosition={"Type": "TRIM_HORIZON"}
            )
            events = iter(answer["EventStream"])
            assert [r["Data"] for r in next(events)["SubscribeToShardEvent"]["Records"]] == produced
            answer["EventStream"].close()


def test_nothing_lost_through_injected_resource_in_use_throttling_5xx_and_drops(kinesis_mock: LocalServer, efo) -> None:
    stream, consumer = efo
    produced = [f"t{i}".encode() for i in range(4)]
    _put(kinesis_mock, stream, produced)
    faults = Faults(
        throttle_rate=0.2,
        server_error_rate=0.2,
        drop_rate=0.2,
        errors=(("ResourceInUseException", 0.2), ("LimitExceededException", 0.2)),
        actions=SUBSCRIBE,
    )
    with FaultProxy(kinesis_mock.endpoint_url, faults, seed=27) as proxy:  # seed 27: each kind once, then success
        sub = subscriber(proxy.endpoint_url, consumer, stream, SHARD0, retry=RetryPolicy(20, 10, 50))
        assert data(read_to_tip(sub, Position(TRIM_HORIZON))) == produced
    kinds = ("throttled", "server_error", "dropped", "ResourceInUseException", "LimitExceededException")
    injected = sum(proxy.stats[kind] for kind in kinds)
    assert all(proxy.stats[kind] >= 1 for kind in kinds) and sub.calls == injected + 1


def test_retries_run_out_naming_shard_consumer_and_error(kinesis_mock: LocalServer, efo) -> None:
    stream, consumer = efo
    faults = Faults(errors=(("ResourceInUseException", 1.0),), actions=SUBSCRIBE)
    with FaultProxy(kinesis_mock.endpoint_url, faults) as proxy:
        sub = subscriber(proxy.endpoint_url, consumer, stream, SHARD0, retry=RetryPolicy(2, 1, 2))
        with pytest.raises(SubscriptionError) as info:
            read_to_tip(sub, Position(TRIM_HORIZON))
    message = str(info.value)
    assert SHARD0 in message and consumer.name in message and "ResourceInUseException" in message
    assert proxy.calls["SubscribeToShard"] == 3


BATCHES = 3


@pytest.mark.slow
def test_batch_ends_and_a_handover_cost_no_refusal_in_a_process_and_at_most_one_across(
    kinesis_mock: LocalServer, efo, quota_proxy_mock: QuotaProxy
) -> None:
    """Behind AWS's quotas: BATCHES reads in a row in this process (a batch ends, the next batch's task, or the
    broker resubscribing where its buffer does not cover), each a new subscriber with a retry policy that would ask
    again within milliseconds: each waits until 5 s after the previous success, none is refused. Then another
    process (its own pacer: a task moved to another host, a broker or driver restarted) subscribes at once: refused
    once (ResourceInUseException), waits the 5 s out, reads. Bound: refused <= 1 per handover, 0 per batch."""
    stream, consumer = efo
    sequences = _put(kinesis_mock, stream, [b"a", b"b", b"c"])
    eager = RetryPolicy(max_retries=30, initial_interval_ms=10, max_interval_ms=20)
    for _ in range(BATCHES):
        sub = subscriber(quota_proxy_mock.endpoint_url, consumer, stream, SHARD0, retry=eager)
        assert [row[2] for row in rows(read_to_tip(sub, Position(TRIM_HORIZON)))] == sequences
        assert (sub.calls, sub.refused_calls) == (1, 0)
    other = subscriber(quota_proxy_mock.endpoint_url, consumer, stream, SHARD0, retry=eager)
    other.pacer = SubscribePacer()  # another process's
    assert [row[2] for row in rows(read_to_tip(other, Position(TRIM_HORIZON)))] == sequences
    subscribes = quota_proxy_mock.report().tally(stream=stream, action="SubscribeToShard")
    assert other.refusals == {"ResourceInUseException": 1} and other.calls == 2
    assert (subscribes.calls, subscribes.refused) == (BATCHES + 2, 1), subscribes
    assert subscribes.refusals == {IN_USE: 1}


def test_a_stream_that_keeps_ending_at_once_fails_instead_of_looping(kinesis_mock: LocalServer, efo) -> None:
    stream, consumer = efo
    with FaultProxy(kinesis_mock.endpoint_url, Faults(end_event_stream_after=0, actions=SUBSCRIBE)) as proxy:
        sub = subscriber(proxy.endpoint_url, consumer, stream, SHARD0, retry=RetryPolicy(2, 1, 2))
        with pytest.raises(SubscriptionError, match=r"failed 3 times in a row; last error: EndedWithoutEventsError"):
            read_to_tip(sub, Position(TRIM_HORIZON))
    assert proxy.calls["SubscribeToShard"] == sub.calls == 3


def test_a_silent_subscription_times_out_as_a_recoverable_error(kinesis_mock: LocalServer, efo) -> None:
    """kinesis-mock sends an event about once a second: a 0.3 s timeout between events cuts the subscription,
    which counts as a recoverable failure (a SubscriptionError once retries run out, not a raw urllib3 error)."""
    stream, consumer = efo
    sub = subscriber(kinesis_mock.endpoint_url, consumer, stream, SHARD0, retry=RetryPolicy(0, 1, 2), timeout_s=0.3)
    with pytest.raises(SubscriptionError, match=r"failed 1 times in a row; last error: ReadTimeoutError"):
        read_to_tip(sub, Position(TRIM_HORIZON))
    assert sub.calls == 1


@pytest.mark.slow
def test_event_streams_are_closed_and_their_sockets_released(
    kinesis_mock: LocalServer, mock_stream, request: pytest.FixtureRequest
) -> None:
    """Closed when the caller stops early, and when a subscription fails, even while something else still holds
    the answer (here the test itself, as botocore's leaking EventStream or a kept traceback would)."""
    stream = mock_stream(shards=2)
    shards = list_shard_ids(kinesis_mock.client("kinesis"), stream)
    _put(kinesis_mock, stream, [f"s{i}".encode() for i in range(4)])
    consumers = [active_consumer(kinesis_mock.endpoint_url, stream, f"sockets-{i}") for i in range(3)]
    client = kinesis(kinesis_mock.endpoint_url)
    client.describe_stream_summary(StreamName=stream)  # a pooled connection
    answers: list = []
    client.meta.events.register(
        "after-call.kinesis.SubscribeToShard", lambda parsed, **_: answers.append(parsed), unique_id="test-keep"
    )
    request.addfinalizer(
        lambda: client.meta.events.unregister("after-call.kinesis.SubscribeToShard", unique_id="test-keep")
    )
    before = sockets_to(kinesis_mock.port)
    subscriptions = 0
    for consumer in consumers:
        for shard in shards:
            sub = subscriber(kinesis_mock.endpoint_url, consumer, stream, shard, retry=FAST)
            with closing(sub.pages(Position(TRIM_HORIZON))) as stream_pages:
                next(stream_pages)  # stop with the event stream still open
            subscriptions += sub.calls
    assert subscriptions == 6
    assert sockets_to(kinesis_mock.port) <= before
    # kinesis-mock refuses a second subscription to a consumer+shard with an exception event in the stream.
    holder = subscriber(kinesis_mock.endpoint_url, consumers[0], stream, shards[0])
    with closing(holder.pages(Position(TRIM_HORIZON))) as open_stream:
        next(open_stream)
        during = sockets_to(kinesis_mock.port)
        refused = subscriber(kinesis_mock.endpoint_url, consumers[0], stream, shards[0], retry=RetryPolicy(2, 1, 2))
        with pytest.raises(SubscriptionError, match="ResourceInUseException") as kept:
            read_to_tip(refused, Position(TRIM_HORIZON))
        assert refused.calls == 3 and sockets_to(kinesis_mock.port) <= during
    assert kept.value is not None and sockets_to(kinesis_mock.port) <= before
    assert len(answers) == 6 + 1 + 3 and all(answer[RAW_EVENT_STREAM].closed for answer in answers)
