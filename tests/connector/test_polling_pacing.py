"""GetRecords pacing: successive calls on one shard start at least ``kinesis.getRecords.fetchIntervalMs`` apart
(Kinesis allows 5 per second per shard), and the time a call itself took counts toward that interval.

The clock is simulated (no timing assertions): each GetRecords to kinesalite advances it by a chosen duration, and
the transport's pauses advance it by what they sleep."""

from __future__ import annotations

from typing import Any

import pytest

from connector.aws import ClientSettings, kinesis_reader_client
from connector.decode import ShardContext
from connector.fetch.polling import CallPacer, GetRecordsTransport, PollingSettings
from connector.offsets import TRIM_HORIZON, Position
from connector.retry import RetryPolicy
from connector.shards import list_shards
from localaws import LocalServer
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY
from localaws.streams import put_records

INTERVAL_S = 0.2


class SimulatedClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class TimedCalls:
    """A real Kinesis client whose GetRecords calls take ``call_s`` on the simulated clock; records call starts."""

    def __init__(self, kinesis: Any, clock: SimulatedClock, call_s: float):
        self.kinesis, self.clock, self.call_s = kinesis, clock, call_s
        self.starts: list[float] = []

    def get_records(self, **kwargs: Any) -> Any:
        self.starts.append(self.clock.now)
        answer = self.kinesis.get_records(**kwargs)
        self.clock.now += self.call_s
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kinesis, name)


def test_the_pacer_waits_only_what_is_left_of_the_interval() -> None:
    clock = SimulatedClock()
    pacer = CallPacer(INTERVAL_S, clock, clock.sleep)
    pacer.wait()  # the first call: nothing to wait for
    clock.now += 0.05  # that call took 50 ms
    pacer.wait()
    clock.now += 0.5  # this one took longer than the interval
    pacer.wait()
    assert clock.sleeps == [pytest.approx(0.15)]
    assert CallPacer(0.0, clock, clock.sleep).wait() is None and clock.sleeps == [pytest.approx(0.15)]


@pytest.mark.parametrize(("call_s", "expected_sleep_s"), [(0.05, 0.15), (0.3, None)])
def test_calls_on_a_shard_start_an_interval_apart_counting_the_calls_own_time(
    kinesalite: LocalServer, lite_stream, call_s: float, expected_sleep_s: float | None
) -> None:
    stream = lite_stream(shards=1)
    kinesis = kinesalite.client("kinesis")
    put_records(kinesis, stream, [(f"k{i}".encode(), f"k{i}") for i in range(7)])
    shard = list_shards(kinesis, stream)[0]
    clock = SimulatedClock()
    settings = ClientSettings(
        region="us-east-1",
        endpoint_url=kinesalite.endpoint_url,
        access_key_id=DUMMY_ACCESS_KEY,
        secret_key=DUMMY_SECRET_KEY,
    )
    calls = TimedCalls(kinesis_reader_client(settings), clock, call_s)
    context = ShardContext(stream, shard.shard_id, shard.starting_hash_key, shard.ending_hash_key)
    transport = GetRecordsTransport(calls, context, RetryPolicy(), PollingSettings(3, INTERVAL_S))
    transport.pacer = CallPacer(INTERVAL_S, clock, clock.sleep)

    rows = 0
    for page in transport.pages(Position(TRIM_HORIZON), lambda: None):
        rows += len(page)
        if rows == 7:
            break
    assert rows == 7 and len(calls.starts) == 3  # 3 + 3 + 1 records
    gaps = [later - earlier for earlier, later in zip(calls.starts, calls.starts[1:], strict=False)]
    assert all(gap >= INTERVAL_S - 1e-9 for gap in gaps), gaps  # never faster than Kinesis allows
    expected = [] if expected_sleep_s is None else [pytest.approx(expected_sleep_s)] * 2
    assert clock.sleeps == expected  # ... and no slower: the call's own time counts
