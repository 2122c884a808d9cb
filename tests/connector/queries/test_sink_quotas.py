"""The sink at a shard's write quota (1,000 records and 1 MiB a second), through ``localaws.quota_proxy`` with AWS's
limits in front of kinesalite: a write bigger than a second's quota ends with every row in the stream exactly
once, sent as the shard had room (``pyspark_aws_kinesis.sink.pacing``).

The bound on refusals, per write on a one-shard stream: a task paces the shard to its quota from the first call,
so it is refused at most one call's worth (500 rows, or the 256 KiB aggregates of a call), when a call arrives
before the stream counted our oldest write as paid back. Learning the quota from a first refusal had up to two
calls' worth refused; a sink that backs off for a fixed time instead met the full second again and again (1,500
plain and 20 aggregated entries refused for the same writes)."""

from __future__ import annotations

from collections import Counter

import pytest

from localaws import LocalServer
from localaws.quota_proxy import QuotaProxy
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY
from tests.connector.support.sink_util import _rows, _stored_rows
from tests.connector.support.source_util import FORMAT

MIB = 1024 * 1024
PLAIN_ROWS = 4000  # 4 s of one shard's 1,000 records/s
AGGREGATED_ROWS = 5000  # ~5 MiB: 5 s of one shard's 1 MiB/s, in 256 KiB aggregates


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
