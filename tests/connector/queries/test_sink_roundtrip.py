"""Source -> sink -> source: rows read from one stream, written by the sink, read back by our source unchanged."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from localaws import LocalServer
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY
from localaws.streams import put_records, read_stream

FORMAT = "aws-kinesis"


def _options(server: LocalServer, stream: str, **extra: str) -> dict[str, str]:
    return {
        "kinesis.streamName": stream,
        "kinesis.endpointUrl": server.endpoint_url,
        "kinesis.awsAccessKeyId": DUMMY_ACCESS_KEY,
        "kinesis.awsSecretKey": DUMMY_SECRET_KEY,
        "kinesis.clientRetryIntervalsMs": "1",
        "kinesis.clientMaxRetryIntervalMs": "20",
        **extra,
    }


def _read_options(server: LocalServer, stream: str, metadata: Path) -> dict[str, str]:
    return _options(
        server,
        stream,
        **{
            "kinesis.startingPosition": "TRIM_HORIZON",
            "kinesis.metadataPath": str(metadata),
            "kinesis.getRecords.fetchIntervalMs": "0",
        },
    )


def _produce(server: LocalServer, stream: str, count: int) -> Counter:
    # Binary payloads with every byte value, so nothing relies on the data being text.
    records = [(bytes([i % 256, (i * 7) % 256]) + f"-record-{i}".encode(), f"key-{i % 13}") for i in range(count)]
    put_records(server.client("kinesis"), stream, records)
    return Counter(records)


def _read_back(spark, server: LocalServer, stream: str, metadata: Path) -> list:
    options = _read_options(server, stream, metadata)
    return spark.read.format(FORMAT).options(**options).load().collect()


@pytest.mark.parametrize("aggregation", ["true", "false"])
def test_batch_round_trip_keeps_every_row_and_key(
    spark, kinesalite: LocalServer, lite_stream, tmp_path: Path, aggregation: str
) -> None:
    source, target = lite_stream(shards=2), lite_stream(shards=3)
    produced = _produce(kinesalite, source, 400)
    rows = spark.read.format(FORMAT).options(**_read_options(kinesalite, source, tmp_path / "m1")).load()
    # The frame still carries the source's streamName column: the kinesis.streamName option must win over it.
    write_options = _options(kinesalite, target, **{"kinesis.sink.aggregationEnabled": aggregation})
    rows.write.format(FORMAT).options(**write_options).mode("append").save()

    back = _read_back(spark, kinesalite, target, tmp_path / "m2")
    assert Counter((bytes(row.data), row.partitionKey) for row in back) == produced
    assert {row.streamName for row in back} == {target}
    if aggregation == "true":
        assert len(read_stream(kinesalite.client("kinesis"), target)) < 20  # written as aggregates, read as rows
        assert max(row.subSequenceNumber for row in back) > 0
    assert len(read_stream(kinesalite.client("kinesis"), source)) == 400  # nothing looped back into the source


def test_streaming_round_trip(spark, kinesalite: LocalServer, lite_stream, tmp_path: Path) -> None:
    source, target = lite_stream(shards=2), lite_stream(shards=2)
    produced = _produce(kinesalite, source, 300)
    query = (
        spark.readStream.format(FORMAT)
        .options(**_read_options(kinesalite, source, tmp_path / "m1"))
        .load()
        .selectExpr("data", "partitionKey")
        .writeStream.format(FORMAT)
        .options(**_options(kinesalite, target))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    back = _read_back(spark, kinesalite, target, tmp_path / "m2")
    assert Counter((bytes(row.data), row.partitionKey) for row in back) == produced
