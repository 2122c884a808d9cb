"""The sink at a shard's write quota (1,000 records and 1 MiB a second), through ``localaws.quota_proxy`` with AWS's
limits in front of kinesalite: a write bigger than a second's quota ends with every row in the stream exactly
once, sent as the shard had room (``pyspark_aws_kinesis.sink.pacing``).

The bound on refusals, per write on a one-shard stream: a task paces the shard to its quota from the first call,
so it is refused at most one call's worth (500 rows, or the 256 KiB aggregates of a call), when a call arrives
before the stream counted our oldest write as paid back. Learning the quota from a first refusal had up to two
calls' worth refused; a sink that backs off for a fixed time instead met the full second again and again (1,500
plain and 20 aggregated entries refused for the same writes).
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
from pyspark_aws_kinesis.sink.entries import Entry
from pyspark_aws_kinesis.sink.put_records import PutStats, put_all

ROW_BYTES = 1000
MIB = 1024 * 1024
PLAIN_ROWS = 4000  # 4 s of one shard's 1,000 records/s
AGGREGATED_ROWS = 5000  # ~5 MiB: 5 s of one shard's 1 MiB/s, in 256 KiB aggregates


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
    [(False, PLAIN_ROWS, 500), (True, AGGREGATED_ROWS, 5)],
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
