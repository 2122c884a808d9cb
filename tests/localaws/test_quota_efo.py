"""The quota proxy in front of kinesis-mock: SubscribeToShard once a second and not within 5 s of a success, its
events paced to 2 MiB/s per consumer and shard, the consumer calls' per-stream limits, and RegisterStreamConsumer
refused while 5 consumers are CREATING. Time is moved by hand (``ManualClock``); streams stay small (kinesis-mock
is slow). botocore's subscribe_to_shard needs the initial-response event kinesis-mock omits: a FaultProxy in front
of the quota proxy adds it (the two proxies chain)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from localaws import LocalAws, LocalServer, aws_client
from localaws.fault_proxy import FaultProxy, Faults
from localaws.quota_model import ManualClock, MiB
from localaws.quota_proxy import QuotaProxy
from localaws.servers import kinesis_mock_taking
from localaws.streams import create_stream, unique_name

SHARD_0, SHARD_1 = "shardId-000000000000", "shardId-000000000001"
NO_RETRIES = Config(retries={"total_max_attempts": 1, "mode": "standard"}, read_timeout=30)


@dataclass
class Proxied:
    proxy: QuotaProxy
    kinesis: Any  # through both proxies
    direct: Any  # kinesis-mock itself


@pytest.fixture
def proxied(kinesis_mock: LocalServer) -> Iterator[Proxied]:
    with (
        QuotaProxy(kinesis_mock.endpoint_url, clock=ManualClock()) as proxy,
        FaultProxy(proxy.endpoint_url, Faults(initial_response=True, actions=frozenset({"SubscribeToShard"}))) as front,
    ):
        yield Proxied(proxy, aws_client("kinesis", front.endpoint_url, config=NO_RETRIES), kinesis_mock.client())


def stream_arn(kinesis, stream: str) -> str:
    return kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["StreamARN"]


def active_consumer(direct, stream: str) -> str:
    arn = direct.register_stream_consumer(StreamARN=stream_arn(direct, stream), ConsumerName="c")["Consumer"]
    while direct.describe_stream_consumer(ConsumerARN=arn["ConsumerARN"])["ConsumerDescription"]["ConsumerStatus"] != (
        "ACTIVE"
    ):
        time.sleep(0.05)
    return arn["ConsumerARN"]


def subscribe(kinesis, consumer: str, shard: str) -> str | None:
    """Subscribe and close at once; the error code, or None if subscribed."""
    try:
        answer = kinesis.subscribe_to_shard(ConsumerARN=consumer, ShardId=shard, StartingPosition={"Type": "LATEST"})
    except ClientError as error:
        return error.response["Error"]["Code"]
    answer["EventStream"].close()
    return None


def test_subscribe_to_shard_is_refused_within_1_s_and_within_5_s_of_a_success(proxied: Proxied) -> None:
    stream = create_stream(proxied.direct, unique_name("quota-efo"), 2)
    consumer = active_consumer(proxied.direct, stream)
    clock = proxied.proxy.clock
    assert subscribe(proxied.kinesis, consumer, SHARD_0) is None
    clock.advance(0.5)
    assert subscribe(proxied.kinesis, consumer, SHARD_0) == "LimitExceededException"
    clock.advance(1.0)
    assert subscribe(proxied.kinesis, consumer, SHARD_0) == "ResourceInUseException"
    assert subscribe(proxied.kinesis, consumer, SHARD_1) is None  # another shard of the same consumer
    clock.advance(3.6)  # 5.1 s after the success
    subscribe(proxied.kinesis, consumer, SHARD_0)  # kinesis-mock may still hold the first one: not our refusal
    counted = proxied.proxy.report().tally(stream=stream, shard=SHARD_0, action="SubscribeToShard")
    assert (counted.calls, counted.refusals) == (4, {"calls": 1, "in_use": 1})


def test_events_are_paced_to_2_mib_a_second_per_consumer_and_shard(proxied: Proxied) -> None:
    """Each batch is put after the event of the one before arrived, so each comes in an event of its own; every
    event but the first waits until the ones before are paid back at 2 MiB/s (on the proxy's clock)."""
    stream = create_stream(proxied.direct, unique_name("quota-efo"), 1)
    consumer = active_consumer(proxied.direct, stream)
    clock = proxied.proxy.clock
    batch = [{"Data": b"x" * 300_000, "PartitionKey": f"k{i}"} for i in range(2)]
    answer = proxied.kinesis.subscribe_to_shard(
        ConsumerARN=consumer, ShardId=SHARD_0, StartingPosition={"Type": "TRIM_HORIZON"}
    )
    started, sizes = clock.now(), []
    with closing(answer["EventStream"]) as events:
        proxied.direct.put_records(StreamName=stream, Records=batch)
        for event in events:
            records = event["SubscribeToShardEvent"]["Records"]
            if records:
                sizes.append(sum(len(r["Data"]) + len(r["PartitionKey"]) for r in records))
                if len(sizes) == 3:
                    break
                proxied.direct.put_records(StreamName=stream, Records=batch)
    assert sizes == [600_000 + 4] * 3
    assert clock.now() - started == pytest.approx(2 * sizes[0] / (2 * MiB))
    pushed = proxied.proxy.report().tally(stream=stream, action="SubscribeToShard")
    assert (pushed.calls, pushed.records, pushed.bytes) == (1, 6, 3 * sizes[0])


def test_consumer_calls_are_limited_per_stream(proxied: Proxied) -> None:
    streams = [create_stream(proxied.direct, unique_name("quota-efo"), 1) for _ in range(2)]
    arns = [stream_arn(proxied.direct, stream) for stream in streams]
    for _ in range(5):
        proxied.kinesis.list_stream_consumers(StreamARN=arns[0])
    with pytest.raises(ClientError, match=f"LimitExceededException.*Rate exceeded for stream {streams[0]} under"):
        proxied.kinesis.list_stream_consumers(StreamARN=arns[0])
    proxied.kinesis.list_stream_consumers(StreamARN=arns[1])
    consumer = active_consumer(proxied.direct, streams[1])
    for _ in range(20):
        proxied.kinesis.describe_stream_consumer(ConsumerARN=consumer)
    with pytest.raises(ClientError, match="LimitExceededException"):
        proxied.kinesis.describe_stream_consumer(ConsumerARN=consumer)
    proxied.proxy.clock.advance(1.0)
    proxied.kinesis.describe_stream_consumer(ConsumerARN=consumer)


# Consumers that stay CREATING long enough to count them (the session's kinesis-mock takes 100 ms). The five
# registrations and two refusals take ~0.8 s on a quiet machine, but once took over 4 s on a loaded CI run, when the
# first consumer turned ACTIVE before the count: the window is wide, and the test waits it out once.
CREATING_S = 15
SLOW_CONSUMERS = kinesis_mock_taking(REGISTER_STREAM_CONSUMER_DURATION=f"{CREATING_S}s")


@pytest.mark.slow
def test_register_stream_consumer_is_refused_while_5_consumers_are_creating(tmp_path) -> None:
    with (
        LocalAws([SLOW_CONSUMERS], log_dir=tmp_path) as aws,
        QuotaProxy(aws.kinesis_mock.endpoint_url, clock=ManualClock()) as proxy,
    ):
        direct = aws.kinesis_mock.client("kinesis")
        kinesis = aws_client("kinesis", proxy.endpoint_url, config=NO_RETRIES)
        arn = stream_arn(direct, create_stream(direct, unique_name("quota-efo"), 1))
        first_made = time.monotonic()
        made = [kinesis.register_stream_consumer(StreamARN=arn, ConsumerName=f"c{i}")["Consumer"] for i in range(5)]
        with pytest.raises(ClientError, match=r"LimitExceededException.*Rate exceeded for account"):
            kinesis.register_stream_consumer(StreamARN=arn, ConsumerName="c5")  # 5 a second per account
        proxy.clock.advance(1.0)
        try:
            kinesis.register_stream_consumer(StreamARN=arn, ConsumerName="c5")
            pytest.fail(f"not refused {time.monotonic() - first_made:.1f} s into a {CREATING_S} s CREATING window")
        except ClientError as refused:
            assert "LimitExceededException" in str(refused) and "5 consumers in CREATING status" in str(refused)
        while (
            direct.describe_stream_consumer(ConsumerARN=made[0]["ConsumerARN"])["ConsumerDescription"]["ConsumerStatus"]
            == "CREATING"
        ):
            time.sleep(0.1)
        proxy.clock.advance(1.0)
        assert kinesis.register_stream_consumer(StreamARN=arn, ConsumerName="c5")["Consumer"]["ConsumerName"] == "c5"
        refusals = proxy.report().tally(action="RegisterStreamConsumer").refusals
        assert refusals == {"calls": 1, "creating": 1}
