"""The sink at a shard's write quota (1,000 records and 1 MiB a second), through ``localaws.quota_proxy`` with AWS's
limits in front of kinesalite: a write bigger than a second's quota ends with every row in the stream exactly
once, the proxy refused entries, and the sink sent them again when the shard had room instead of having call after
call refused (``pyspark_aws_kinesis.sink.pacing``).

The bound on refusals, per write on a one-shard stream: the first call that meets the quota teaches the sink what
the shard takes (its refused entries: at most a whole call of 500 rows, or 4 of a call of five 1 MiB aggregates);
after that at most one more call's worth may be refused, for a call that came at the very edge of a second. A
sink that backs off for a fixed time instead meets the full second again and again: the same writes had 1,500
(plain) and 20 (aggregated) entries refused with the backoff alone.
"""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from source_util import FORMAT

from localaws import LocalServer, aws_client
from localaws.quota_proxy import QuotaProxy
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY
from localaws.streams import read_stream
from pyspark_aws_kinesis.kpl import deaggregate, is_aggregated
from pyspark_aws_kinesis.retry import RetryPolicy
from pyspark_aws_kinesis.sink.commit import SinkCommitMessage
from pyspark_aws_kinesis.sink.pacing import ANY_SHARD, WritePacer
from pyspark_aws_kinesis.sink.planning import AggregateEntry
from pyspark_aws_kinesis.sink.put_records import Entry, PutStats, bucket_of, put_all

ROW_BYTES = 1000
MIB = 1024 * 1024
PLAIN_ROWS = 4000  # 4 s of one shard's 1,000 records/s
AGGREGATED_ROWS = 5000  # ~5 MiB: 5 s of one shard's 1 MiB/s, in ~1 MiB aggregates


def _rows(count: int) -> list[tuple[bytes, str]]:
    return [(f"{i:08d}".encode().ljust(ROW_BYTES, b"x"), f"key-{i % 50}") for i in range(count)]


def _stored_rows(server: LocalServer, stream: str) -> Counter[tuple[bytes, str]]:
    stored: Counter[tuple[bytes, str]] = Counter()
    for record in read_stream(server.client("kinesis"), stream):
        if is_aggregated(record["Data"]):
            stored.update((user.data, user.partition_key) for user in deaggregate(record["Data"]))
        else:
            stored[(record["Data"], record["PartitionKey"])] += 1
    return stored


@pytest.mark.parametrize(
    ("aggregation", "count", "refused_at_most"),
    [(False, PLAIN_ROWS, 2 * 500), (True, AGGREGATED_ROWS, 2 * 4)],
    ids=["plain", "aggregated"],
)
def test_a_write_over_a_seconds_quota_stores_every_row_once_and_retries_when_the_shard_has_room(
    spark, kinesalite: LocalServer, lite_stream, quota_proxy: QuotaProxy, aggregation, count, refused_at_most
) -> None:
    stream = lite_stream(shards=1)
    rows = _rows(count)
    frame = spark.createDataFrame(rows, "data binary, partitionKey string").coalesce(1)  # one task: one sequence
    (
        frame.write.format(FORMAT)
        .option("kinesis.streamName", stream)
        .option("kinesis.endpointUrl", quota_proxy.endpoint_url)
        .option("kinesis.awsAccessKeyId", DUMMY_ACCESS_KEY)
        .option("kinesis.awsSecretKey", DUMMY_SECRET_KEY)
        .option("kinesis.sink.aggregationEnabled", str(aggregation).lower())
        .mode("append")
        .save()
    )
    assert _stored_rows(kinesalite, stream) == Counter(rows)  # every row, once
    written = quota_proxy.report().tally(stream=stream, action="PutRecords")
    print(f"{stream}: {written.records} Kinesis records stored, {written.refused_records} refused")
    assert written.refused_records > 0  # the write met the quota
    assert written.refused_records <= refused_at_most


def test_the_commit_line_counts_the_calls_that_met_a_quota_and_the_wait() -> None:
    message = SinkCommitMessage(0, ("s",), 10, 0, PutStats(records=10, calls=3, throttled_calls=1, paced_s=0.75))
    assert "; 1 calls met a shard's write quota, 0.75 s of the sending spent waiting" in message.describe()
    assert "write quota" not in SinkCommitMessage(0, ("s",), 10, 0, PutStats(records=10, calls=1)).describe()


def test_two_writers_filling_one_shard_take_turns_and_store_everything(
    kinesalite: LocalServer, lite_stream, quota_proxy: QuotaProxy
) -> None:
    """Two call sequences (two tasks) on one shard, with short retry intervals: each is refused while the other's
    writes fill the shard's second, waits for a turn, and neither gives up (with that policy's backoff alone, 3
    retries from 100 ms, one writer gave up on 500 entries within 1.8 s in one run of two)."""
    stream = lite_stream(shards=1)
    client = kinesalite_quota_client(quota_proxy)
    policy = RetryPolicy(max_retries=3, initial_interval_ms=100, max_interval_ms=1000)
    halves = [[Entry(data, key) for data, key in _rows(3000)[i::2]] for i in range(2)]
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda entries: put_all(client, stream, entries, policy), halves))
    assert sum(result.records for result in results) == 3000 and not any(r.failed_entries for r in results)
    assert _stored_rows(kinesalite, stream) == Counter(_rows(3000))
    assert quota_proxy.report().tally(stream=stream, action="PutRecords").refused_records > 0


def kinesalite_quota_client(proxy: QuotaProxy):
    return aws_client("kinesis", proxy.endpoint_url)


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _kib(count: int) -> list[Entry]:
    return [Entry(b"x" * 1020, f"k{i}") for i in range(count)]


def test_the_pacer_sizes_calls_to_the_learned_budget_waits_for_the_payback_and_probes_for_more() -> None:
    clock = _Clock()
    pacer = WritePacer(clock)
    assert pacer.plan(_kib(500), bucket_of) == (500, 0.0)  # nothing learned: everything goes
    pacer.record({ANY_SHARD: (600, 600 * 1024)}, set())
    clock.now += 0.4
    pacer.record({ANY_SHARD: (400, 400 * 1024)}, {ANY_SHARD})  # refused: the budget is what it took, 1,000
    clock.now += 0.1
    count, wait_s = pacer.plan(_kib(500), bucket_of)
    assert count == 0 and wait_s == pytest.approx(0.5)  # until the first 600 are paid back
    clock.now += wait_s
    assert pacer.plan(_kib(700), bucket_of) == (600, 0.0)  # what fits beside the 400 still in the second
    pacer.record({ANY_SHARD: (600, 600 * 1024)}, set())
    clock.now += 5.0  # no refusal for 5 s: 10 % over the budget may go
    assert pacer.plan(_kib(1200), bucket_of) == (1100, 0.0)
    pacer.record({ANY_SHARD: (1100, 1100 * 1024)}, set())  # and was taken: the budget grows
    clock.now += 1.0
    assert pacer.plan(_kib(1300), bucket_of)[0] == 1210


def test_the_pacer_keeps_aggregates_of_a_full_shard_back_and_lets_other_shards_go() -> None:
    clock = _Clock()
    pacer = WritePacer(clock)
    pacer.record({"shard-0": (1, MIB - 10)}, {"shard-0"})  # one aggregate filled the shard's second
    full, free = AggregateEntry(b"x" * 1000, "a", None, "shard-0"), AggregateEntry(b"y" * 1000, "b", None, "shard-1")
    assert pacer.plan([free, full], bucket_of) == (1, 0.0)  # the other shard's goes; the prefix stops before
    count, wait_s = pacer.plan([full, free], bucket_of)
    assert count == 0 and wait_s == pytest.approx(1.0)
