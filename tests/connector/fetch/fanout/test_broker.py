"""The enhanced fan-out subscription broker (kinesis-mock): consecutive reads of a shard share one SubscribeToShard
(counted at the fault proxy) and return every record once, in order, KPL sub-sequence positions included; a
position outside the buffer resubscribes; two worker processes read two shards through one broker; a broker killed
mid-read loses nothing; idle subscriptions and the broker go away with their sockets; the buffer bound holds.
A Spark streaming query through the broker: tests/connector/queries/test_efo_broker.py."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import signal
import tempfile
import time
from pathlib import Path

import pytest

from localaws import LocalServer
from localaws.fault_proxy import FaultProxy
from localaws.quota_model import CALLS
from localaws.quota_proxy import QuotaProxy
from localaws.streams import list_shard_ids, put_records
from pyspark_aws_kinesis.fetch.decode import ShardContext, decode_subscribe_event
from pyspark_aws_kinesis.fetch.fanout import broker as efo_broker
from pyspark_aws_kinesis.fetch.fanout import protocol as efo_protocol
from pyspark_aws_kinesis.fetch.fanout.broker import locate
from pyspark_aws_kinesis.fetch.fanout.client import BrokeredSubscriber, broker_pids, broker_stats
from pyspark_aws_kinesis.fetch.range import FetchLimits, ShardRange, ShardTask
from pyspark_aws_kinesis.kpl import Aggregator
from pyspark_aws_kinesis.positions import AFTER_SEQUENCE_NUMBER, AT_SEQUENCE_NUMBER, LATEST, TRIM_HORIZON, Position
from pyspark_aws_kinesis.retry import RetryPolicy
from tests.connector.support.efo_util import FULL, _page, active_consumer, settings, sockets_to
from tests.connector.support.source_util import put_numbered, wait_for

# kinesis-mock refuses a resubscription to a consumer+shard for ~5 s, as AWS does
PATIENT = RetryPolicy(max_retries=12, initial_interval_ms=500, max_interval_ms=2000)


SECRET = "test-job-secret"  # the job these tests read as (a query draws its own: EfoSettings.broker_secret)


def _broker_pid(directory: str, secret: str = SECRET) -> int | None:
    try:
        return int(Path(directory, efo_protocol.pid_name(efo_protocol.job_name(secret))).read_text())
    except (FileNotFoundError, ValueError):
        return None


def _read(endpoint: str, arn: str, stream: str, shard: str, start: Position, max_records: int | None = None):
    """One task's read of ``shard`` from ``start`` through the broker: (data, where the next read starts)."""
    context = ShardContext(stream, shard, *FULL)
    transport = BrokeredSubscriber(settings(endpoint), 30.0, PATIENT, arn, "efo-test", context, SECRET)
    task = ShardTask(stream, shard, *FULL, start)
    shard_range = ShardRange(task, FetchLimits(max_records=max_records), context)
    rows = [row for batch in shard_range.batches(transport) for row in batch.column("data").to_pylist()]
    assert shard_range.result is not None and transport.direct_reads == 0
    return rows, shard_range.result.next_start()


def _read_until(endpoint, arn, stream, shard, start, count: int, max_records: int | None = None):
    """Reads (like micro-batches) until ``count`` records came: (data, next start)."""
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < count:
        assert time.monotonic() < deadline, f"only {len(got)} of {count} records came"
        rows, start = _read(endpoint, arn, stream, shard, start, max_records)
        got += rows
    return got, start


def _put_aggregate(server: LocalServer, stream: str, prefix: str, count: int) -> tuple[list[bytes], str]:
    aggregator = Aggregator()
    for i in range(count):
        aggregator.add(f"{prefix}{i}".encode(), f"k{i}")
    aggregate = aggregator.flush()
    assert aggregate is not None
    answer = put_records(server.client("kinesis"), stream, [(aggregate.data, aggregate.partition_key)])
    return [f"{prefix}{i}".encode() for i in range(count)], answer[0]["SequenceNumber"]


def test_leases_of_shards_without_subscriptions_are_forgotten() -> None:
    """Every shard a broker ever served kept a lock forever (shards come and go with reshards over months); now a
    lease lives only while a task holds or awaits it or its shard has a subscription."""
    broker = efo_broker.Broker(1 << 20, idle_close_s=0.0, secret=SECRET)
    for number in range(200):  # 200 shards served once each, their subscriptions since closed
        with broker.lease(("credentials", "arn:consumer", f"shardId-{number:012d}")) as held:
            assert held
    assert broker.leases == {}
    key = ("credentials", "arn:consumer", "shardId-000000000000")
    with broker.lease(key):
        with broker.lease(key, wait=False) as second:
            assert not second  # one task at a time per consumer+shard
        assert list(broker.leases) == [key] and broker.leases[key].users == 1
    assert broker.leases == {}


def test_which_positions_the_buffer_covers() -> None:
    """No server: where a read continues in a buffer (two pages; the second a KPL aggregate "30" of 3 rows)."""
    origin = Position(TRIM_HORIZON)
    buffer = [_page(("10", 0), ("20", 0)), _page(("30", 0), ("30", 1), ("30", 2), ("40", 0))]
    after, at = AFTER_SEQUENCE_NUMBER, AT_SEQUENCE_NUMBER
    assert locate(buffer, None, origin, origin) == (0, 0)
    assert locate(buffer, "5", origin, origin) is None  # pages were dropped: the origin is gone
    assert locate(buffer, "5", origin, Position(after, "5")) == (0, 0)  # right after the dropped pages
    assert locate(buffer, "5", origin, Position(after, "5", 0)) is None  # inside a dropped aggregate
    assert locate(buffer, None, origin, Position(after, "10")) == (0, 1)
    assert locate(buffer, None, origin, Position(after, "20")) == (1, 0)
    assert locate(buffer, None, origin, Position(at, "20", 0)) == (0, 1)
    assert locate(buffer, None, origin, Position(after, "30", 0)) == (1, 1)  # inside the aggregate
    assert locate(buffer, None, origin, Position(at, "30", 2)) == (1, 2)
    assert locate(buffer, None, origin, Position(after, "30", 2)) == (1, 3)
    assert locate(buffer, None, origin, Position(after, "30")) == (1, 3)
    assert locate(buffer, None, origin, Position(after, "40")) == (2, 0)  # the next page, when it comes
    assert locate(buffer, None, origin, Position(after, "15")) is None  # not a record of the buffer
    assert locate(buffer, None, origin, Position(LATEST)) is None


@pytest.mark.slow
def test_consecutive_reads_share_one_subscription_and_other_positions_resubscribe(
    kinesis_mock: LocalServer, mock_stream, broker
) -> None:
    stream = mock_stream(shards=1)
    (shard,) = list_shard_ids(kinesis_mock.client("kinesis"), stream)
    consumer = active_consumer(kinesis_mock.endpoint_url, stream)
    with FaultProxy(kinesis_mock.endpoint_url) as proxy:
        url = proxy.endpoint_url
        produced = put_numbered(kinesis_mock, stream, "a", 5)
        got, start = _read_until(url, consumer.arn, stream, shard, Position(TRIM_HORIZON), 5)
        for prefix in ("b", "c"):
            produced += put_numbered(kinesis_mock, stream, prefix, 3)
            more, start = _read_until(url, consumer.arn, stream, shard, start, 3)
            got += more
        # A KPL aggregate read 2 user records at a time: positions inside it are served from the buffer too.
        users, sequence = _put_aggregate(kinesis_mock, stream, "u", 5)
        produced += users
        more, start = _read_until(url, consumer.arn, stream, shard, start, 5, max_records=2)
        got += more
        assert got == produced  # every record once, in order
        assert proxy.calls["SubscribeToShard"] == 1
        # A position before the buffer (a batch that runs again) resubscribes there.
        again, _ = _read_until(url, consumer.arn, stream, shard, Position(TRIM_HORIZON), len(produced))
        assert again == produced
        assert proxy.calls["SubscribeToShard"] > 1  # (kinesis-mock refuses it for ~5 s: retried)
        # Inside a KPL aggregate, at a sub-sequence number, on a new subscription: the rest of the aggregate.
        again, _ = _read_until(url, consumer.arn, stream, shard, Position(AT_SEQUENCE_NUMBER, sequence, 3), 2)
        assert again == users[3:]


def _worker(directory: str, endpoint: str, arn: str, stream: str, shard: str, start: Position, count: int, out) -> None:
    os.environ[efo_protocol.ENV_DIR] = directory
    out.put((shard, *_read_until(endpoint, arn, stream, shard, start, count)))


def _in_processes(jobs: list[tuple]) -> dict[str, tuple[list[bytes], Position]]:
    """Run ``_worker`` for each job in its own (spawned) process at once: {shard: (data, next start)}."""
    spawn = multiprocessing.get_context("spawn")
    out = spawn.Queue()
    processes = [spawn.Process(target=_worker, args=(*job, out)) for job in jobs]
    for process in processes:
        process.start()
    found = {}
    for _ in processes:
        shard, rows, start = out.get(timeout=120)
        found[shard] = (rows, start)
    for process in processes:
        process.join(30)
        assert process.exitcode == 0
    return found


@pytest.mark.slow
def test_two_worker_processes_read_two_shards_through_one_broker(
    kinesis_mock: LocalServer, mock_stream, broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Spawning the second pair of workers took over the default 10 s idle close on a loaded CI machine, which
    # closed the subscriptions between the pairs: this test is about sharing them, not closing them.
    monkeypatch.setenv(efo_broker.ENV_IDLE_CLOSE, "120")
    stream = mock_stream(shards=2)
    shards = list_shard_ids(kinesis_mock.client("kinesis"), stream)
    consumer = active_consumer(kinesis_mock.endpoint_url, stream)
    kinesis = kinesis_mock.client("kinesis")
    with FaultProxy(kinesis_mock.endpoint_url) as proxy:

        def put(prefix: str) -> dict[str, list[bytes]]:
            items = {shard: [f"{prefix}-{shard[-1]}-{i}".encode() for i in range(3)] for shard in shards}
            for shard, data in items.items():  # ExplicitHashKey puts each group on its shard
                low = 0 if shard == shards[0] else 2**127
                for item in data:
                    kinesis.put_record(StreamName=stream, Data=item, PartitionKey="k", ExplicitHashKey=str(low + 1))
            return items

        first = put("a")
        jobs = [(broker, proxy.endpoint_url, consumer.arn, stream, s, Position(TRIM_HORIZON), 3) for s in shards]
        found = _in_processes(jobs)
        assert {shard: rows for shard, (rows, _) in found.items()} == first
        second = put("b")  # new processes (other workers) go on where the first ones stopped
        found = _in_processes([(*job[:5], found[job[4]][1], 3) for job in jobs])
        assert {shard: rows for shard, (rows, _) in found.items()} == second
        assert proxy.calls["SubscribeToShard"] == 2  # one per shard, held by the one broker
        assert len(broker_stats(SECRET)) == 2


@pytest.mark.slow
def test_a_broker_killed_mid_read_loses_nothing(kinesis_mock: LocalServer, mock_stream, broker) -> None:
    stream = mock_stream(shards=1)
    (shard,) = list_shard_ids(kinesis_mock.client("kinesis"), stream)
    consumer = active_consumer(kinesis_mock.endpoint_url, stream)
    context = ShardContext(stream, shard, *FULL)
    url = kinesis_mock.endpoint_url
    transport = BrokeredSubscriber(settings(url), 30.0, PATIENT, consumer.arn, "t", context, SECRET)
    produced = put_numbered(kinesis_mock, stream, "a", 4)
    got: list[bytes] = []
    with_rows = (page for page in transport.pages(Position(TRIM_HORIZON)) if len(page))
    got += next(with_rows).data
    assert got == produced  # one page so far
    old = _broker_pid(broker)
    assert old is not None
    os.kill(old, signal.SIGKILL)
    produced += put_numbered(kinesis_mock, stream, "b", 3)
    while len(got) < len(produced):
        got += next(with_rows).data  # reconnects to a new broker, which resubscribes after the last record
    with_rows.close()
    assert got == produced and transport.direct_reads == 0
    assert _broker_pid(broker) not in (None, old)


@pytest.mark.slow
def test_idle_subscriptions_close_their_sockets_and_the_broker_exits(
    kinesis_mock: LocalServer, mock_stream, broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Idle for 2 s: long enough for a loaded machine to see the subscription open after the read.
    monkeypatch.setenv(efo_broker.ENV_IDLE_CLOSE, "2")
    monkeypatch.setenv(efo_broker.ENV_IDLE_EXIT, "3")
    stream = mock_stream(shards=1)
    (shard,) = list_shard_ids(kinesis_mock.client("kinesis"), stream)
    consumer = active_consumer(kinesis_mock.endpoint_url, stream)
    produced = put_numbered(kinesis_mock, stream, "a", 3)
    assert _read_until(kinesis_mock.endpoint_url, consumer.arn, stream, shard, Position(TRIM_HORIZON), 3)[0] == produced
    pid = _broker_pid(broker)
    assert pid is not None and len(broker_stats(SECRET)) == 1
    assert sockets_to(kinesis_mock.port, pid) >= 1  # the open subscription
    wait_for(lambda: broker_stats(SECRET) == {}, 10, 0.1, "the idle subscription closed")
    if os.path.exists(f"/proc/{pid}"):
        assert sockets_to(kinesis_mock.port, pid) == 0
    wait_for(lambda: not os.path.exists(f"/proc/{pid}"), 15, 0.1, "the idle broker to exit")
    assert not os.path.exists(os.path.join(broker, efo_protocol.socket_name(efo_protocol.job_name(SECRET))))


@pytest.mark.slow
def test_a_full_buffer_stops_reading_the_subscription_and_loses_nothing(
    kinesis_mock: LocalServer, mock_stream, broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(efo_broker.ENV_MAX_BUFFER, "1")  # one page fills it
    stream = mock_stream(shards=1)
    (shard,) = list_shard_ids(kinesis_mock.client("kinesis"), stream)
    consumer = active_consumer(kinesis_mock.endpoint_url, stream)
    url = kinesis_mock.endpoint_url
    produced = put_numbered(kinesis_mock, stream, "a", 3)
    got, start = _read_until(url, consumer.arn, stream, shard, Position(TRIM_HORIZON), 1, max_records=1)
    for prefix in ("b", "c"):  # kinesis-mock pushes about once a second: separate events
        time.sleep(1.5)
        produced += put_numbered(kinesis_mock, stream, prefix, 3)
    time.sleep(1.5)
    (stats,) = broker_stats(SECRET).values()
    assert stats["paused"] and stats["pages"] == 1 and stats["bytes"] == stats["largest_page"]
    more, _ = _read_until(url, consumer.arn, stream, shard, start, len(produced) - len(got))
    assert got + more == produced


HANDOVERS = 2


@pytest.mark.slow
def test_a_shard_handed_between_two_hosts_brokers_is_refused_at_most_once_per_handover(
    kinesis_mock: LocalServer, mock_stream, broker, quota_proxy_mock: QuotaProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Behind AWS's quotas: a shard's batches read on host A, then B, then A again (two broker directories: two
    hosts' brokers), each host's idle subscription closed after 2 s. A new host's SubscribeToShard within 5 s of
    the other's success is refused once and waited out 5 s (by then the other host closed its idle subscription),
    never retried at once: the proxy refuses at most 1 call per handover, none for the once-a-second rate, and a
    handover costs at most 2 calls besides its subscription (kinesis-mock may notice the other's close late)."""
    monkeypatch.setenv(efo_broker.ENV_IDLE_CLOSE, "2")
    hosts = [broker, tempfile.mkdtemp(prefix="efo-")]
    stream = mock_stream(shards=1)
    (shard,) = list_shard_ids(kinesis_mock.client("kinesis"), stream)
    consumer = active_consumer(kinesis_mock.endpoint_url, stream)
    url = quota_proxy_mock.endpoint_url
    produced: list[bytes] = []
    got: list[bytes] = []
    start = Position(TRIM_HORIZON)
    try:
        for turn, host in enumerate([hosts[0], hosts[1], hosts[0]]):
            monkeypatch.setenv(efo_protocol.ENV_DIR, host)
            produced += put_numbered(kinesis_mock, stream, f"t{turn}", 3)
            more, start = _read_until(url, consumer.arn, stream, shard, start, 3)
            got += more
    finally:
        for pid in broker_pids(hosts[1]):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert got == produced
    subscribes = quota_proxy_mock.report().tally(stream=stream, action="SubscribeToShard")
    assert subscribes.refusals.get(CALLS, 0) == 0, subscribes
    assert subscribes.refused <= HANDOVERS, subscribes
    assert subscribes.calls <= 1 + HANDOVERS * 3, subscribes  # a subscription per host's turn + 2 per handover


def test_buffered_pages_keep_no_arrow_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """No server: a page decoded in the broker goes to its buffer without the Arrow columns the decode kept for a
    batch (the buffer's bound counts each page's data once; the wire sends the lists), and still reads the same."""
    context = ShardContext("s", "shardId-000000000000", *FULL)
    payload = json.dumps(
        {
            "Records": [
                {"Data": "AAEC", "PartitionKey": "k", "SequenceNumber": "7", "ApproximateArrivalTimestamp": 1.5}
            ],
            "ContinuationSequenceNumber": "7",
            "MillisBehindLatest": 0,
        }
    )
    decoded = decode_subscribe_event(payload, context)
    assert decoded._arrow  # what the broker must not keep
    expected = decoded.to_batch(context, 0, 1)

    class OnePage:
        aborted = False

        def __init__(self, *args: object) -> None:
            pass

        def pages(self, _start: Position):
            yield decode_subscribe_event(payload, context)

    monkeypatch.setattr(efo_broker, "subscription_client", lambda *args: None)
    monkeypatch.setattr(efo_broker, "ShardSubscriber", OnePage)
    request = efo_protocol.Request(
        settings("http://unused"), 1.0, PATIENT, "arn:consumer", "c", context, Position(TRIM_HORIZON)
    )
    subscription = efo_broker.Subscription(request, 1 << 20)
    subscription.thread.join(5)
    assert len(subscription.buffer) == 1 and subscription.buffer[0]._arrow == {}
    assert subscription.buffer[0].to_batch(context, 0, 1).equals(expected)
