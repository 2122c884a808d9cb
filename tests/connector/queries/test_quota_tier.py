"""The source, the sink and the generator behind AWS's Kinesis quotas (``localaws.quota_proxy``): nothing is lost or
read twice, and what the quotas refused is counted, per client. How polite each one is (how much it was refused,
how much it cost a neighbour) is reported here, not asserted: ``assert_refused_at_most`` is there for that."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

import kinesis_generator
from localaws import LocalServer
from localaws.neighbour import NEIGHBOUR_TOKEN, Neighbour
from localaws.quota_model import Quotas
from localaws.quota_proxy import QuotaProxy
from localaws.quota_stats import QuotaReport
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY
from localaws.streams import read_stream
from tests.connector.queries.query_util import _committed
from tests.connector.support.efo_util import efo_options
from tests.connector.support.source_util import FORMAT, put_numbered, start_parquet_query, wait_for
from tests.generator.stored_util import assert_stored_as_reported

PATIENT_WRITES = {"kinesis.clientNumRetries": "10", "kinesis.clientRetryIntervalsMs": "200"}
# A write quota that one PutRecords call of 400 entries exceeds: refusals are certain, whatever the timing.
SMALL_WRITES = Quotas(put_records=250)
# The generator sends what it has rendered: on a loaded machine its 400 records went in two calls that 250 a second
# let through. At 100 a second a call of more than 100 records is refused in part.
TINY_WRITES = Quotas(put_records=100)


def _report(proxy: QuotaProxy, stream: str) -> QuotaReport:
    report = proxy.report(groups={"neighbour": NEIGHBOUR_TOKEN})  # everything else: "other", ours
    print(report.summary())
    for client in report.clients():
        reads = report.tally(stream=stream, client=client, action="GetRecords")
        print(f"{stream} {client}: {reads.refused}/{reads.calls} GetRecords refused ({reads.refused_share:.1%})")
    return report


def _stream_query(spark, options: dict[str, str], output: Path, checkpoint: Path):
    return start_parquet_query(spark, options, output, checkpoint, trigger="500 milliseconds")


@pytest.mark.slow
def test_the_polling_source_behind_the_quotas_beside_a_neighbour_reads_every_record_once(
    spark, kinesalite: LocalServer, lite_stream, quota_proxy: QuotaProxy, tmp_path
) -> None:
    stream = lite_stream(shards=2)
    options = {  # the connector's defaults, as a user has them
        "kinesis.streamName": stream,
        "kinesis.endpointUrl": quota_proxy.endpoint_url,
        "kinesis.awsAccessKeyId": DUMMY_ACCESS_KEY,
        "kinesis.awsSecretKey": DUMMY_SECRET_KEY,
        "kinesis.metadataPath": str(tmp_path / "meta"),
        "kinesis.startingPosition": "TRIM_HORIZON",
    }
    output = tmp_path / "out"
    with Neighbour(quota_proxy.endpoint_url, stream) as neighbour:
        query = _stream_query(spark, options, output, tmp_path / "checkpoint")
        try:
            produced = put_numbered(kinesalite, stream, "a", 100, keys=20)
            wait_for(lambda: len(_committed(spark, output)) >= len(produced), what="every record")
            wait_for(lambda: len(neighbour.read) >= len(produced), 30, what="the neighbour to read every record")
        finally:
            query.stop()
    assert Counter(_committed(spark, output)) == Counter(produced)
    assert Counter(neighbour.read) == Counter(produced)
    report = _report(quota_proxy, stream)
    ours = report.tally(stream=stream, client="other", action="GetRecords")
    assert ours.calls > 0 and ours.records >= len(produced)
    theirs = report.tally(stream=stream, client="neighbour", action="GetRecords")
    assert (theirs.calls, theirs.refused) == (neighbour.calls, neighbour.refused)  # counted as the neighbour saw


@pytest.mark.slow
def test_the_efo_source_behind_the_quotas_reads_every_record_once(
    spark, kinesis_mock: LocalServer, mock_stream, quota_proxy_mock: QuotaProxy, tmp_path
) -> None:
    stream = mock_stream(shards=1)
    deregister = {"kinesis.requireConsumerDeregistration": "true"}
    options = efo_options(quota_proxy_mock, stream, tmp_path / "meta", **deregister)
    output = tmp_path / "out"
    query = _stream_query(spark, options, output, tmp_path / "checkpoint")
    try:
        produced = put_numbered(kinesis_mock, stream, "a", 12)
        wait_for(lambda: len(_committed(spark, output)) >= len(produced), what="every record")
    finally:
        query.stop()
    assert Counter(_committed(spark, output)) == Counter(produced)
    report = _report(quota_proxy_mock, stream)
    pushed = report.tally(stream=stream, action="SubscribeToShard")
    assert pushed.calls >= 1 and pushed.records >= len(produced)
    assert pushed.refused == 0, pushed  # batches on one host share the broker's subscription: none refused
    assert report.tally(stream=stream, action="RegisterStreamConsumer").calls == 1


def test_the_sink_behind_the_quotas_writes_every_row_once(spark, kinesalite: LocalServer, lite_stream) -> None:
    stream = lite_stream(shards=1)
    rows = [(f"row-{i}".encode(), f"key-{i % 7}") for i in range(400)]
    frame = spark.createDataFrame(rows, "data binary, partitionKey string").coalesce(1)  # one task, one call
    with QuotaProxy(kinesalite.endpoint_url, SMALL_WRITES) as proxy:
        (
            frame.write.format(FORMAT)
            .option("kinesis.streamName", stream)
            .option("kinesis.endpointUrl", proxy.endpoint_url)
            .option("kinesis.awsAccessKeyId", DUMMY_ACCESS_KEY)
            .option("kinesis.awsSecretKey", DUMMY_SECRET_KEY)
            .option("kinesis.sink.aggregationEnabled", "false")
            .options(**PATIENT_WRITES)
            .mode("append")
            .save()
        )
    stored = Counter((r["Data"], r["PartitionKey"]) for r in read_stream(kinesalite.client("kinesis"), stream))
    assert stored == Counter(rows)
    written = _report(proxy, stream).tally(stream=stream, action="PutRecords")
    assert written.records == len(rows) and written.refused_records > 0


def test_the_generator_behind_the_quotas_stores_every_record_once(kinesalite: LocalServer, lite_stream, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", DUMMY_ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", DUMMY_SECRET_KEY)
    stream = lite_stream(shards=1)
    with QuotaProxy(kinesalite.endpoint_url, TINY_WRITES) as proxy:
        summary = kinesis_generator.run(
            stream_name=stream, count=400, rate=1e9, endpoint_url=proxy.endpoint_url, collect=True
        )
    assert (summary.records, summary.failed) == (400, 0)
    stored = Counter((r["PartitionKey"], r["Data"]) for r in read_stream(kinesalite.client("kinesis"), stream))
    assert_stored_as_reported(stored, summary)
    written = _report(proxy, stream).tally(stream=stream, action="PutRecords")
    assert 400 <= written.records <= 400 + len(summary.doubtful_records or []) and written.refused_records > 0
