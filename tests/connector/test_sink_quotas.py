"""The sink at a shard's write quota (1,000 records and 1 MiB a second), through ``localaws.quota_proxy`` with AWS's
limits in front of kinesalite: a write bigger than a second's quota ends with every row in the stream exactly
once, the proxy refused entries, and the sink sent them again when the shard had room instead of having call after
call refused (``connector.sink.pacing``).

The bound on refusals, per write on a one-shard stream: the first call that meets the quota teaches the sink what
the shard takes (its refused entries: at most a whole call of 500 rows, or 4 of a call of five 1 MiB aggregates);
after that at most one more call's worth may be refused, for a call that came at the very edge of a second. A
sink that backs off for a fixed time instead meets the full second again and again: the same writes had 1,500
(plain) and 20 (aggregated) entries refused with the backoff alone.
"""

from __future__ import annotations

from collections import Counter

import pytest
from source_util import FORMAT

from connector.kpl import deaggregate, is_aggregated
from connector.sink.commit import SinkCommitMessage
from connector.sink.put_records import PutStats
from localaws import LocalServer
from localaws.quota_proxy import QuotaProxy
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY
from localaws.streams import read_stream

ROW_BYTES = 1000
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
