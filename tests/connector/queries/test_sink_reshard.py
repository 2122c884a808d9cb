"""The sink across a reshard, in a Spark write: an aggregate that a split puts on a shard whose hash-key range does not
hold all of its user records has those records sent again, so every reader that drops out-of-range sub-records
(ours, the KCL, aws-kinesis-agg's deaggregator with the KCL's rule) still sees each of them, once.

The split happens on kinesis-mock between the task's ListShards and its PutRecords: the test wraps the task's
``open_shard_router`` so that the first listing is followed by a split, as if another client resharded then."""

from __future__ import annotations

import base64
import logging
from collections import Counter
from typing import Any

import pytest

from localaws import LocalServer
from localaws.streams import iterate_shard
from pyspark_aws_kinesis.kpl import hash_key_of, is_aggregated
from pyspark_aws_kinesis.shards import list_shards
from tests.connector.support.agg_util import agg_user_records
from tests.connector.support.sink_util import MIDDLE, rows, split_after_listing, write
from tests.connector.support.source_util import source_options


def read_like_the_kcl(kinesis: Any, stream: str) -> list[bytes]:
    """Every shard read with aws-kinesis-agg's deaggregator, dropping sub-records outside the shard's hash range."""
    found: list[bytes] = []
    for shard in list_shards(kinesis, stream):
        for record in iterate_shard(kinesis, stream, shard.shard_id):
            for user in agg_user_records(record):
                if shard.holds_hash_key(hash_key_of(user["partitionKey"], user.get("explicitHashKey"))):
                    found.append(base64.b64decode(user["data"]))
    return found


@pytest.mark.slow
def test_a_split_between_listing_and_writing_loses_no_user_record(
    spark, kinesis_mock: LocalServer, mock_stream, monkeypatch, caplog, tmp_path
) -> None:
    stream = mock_stream(shards=1)
    kinesis = kinesis_mock.client("kinesis")
    records = rows(60)
    options = source_options(kinesis_mock, stream, tmp_path / "metadata")  # the sink ignores the reading ones
    handed = split_after_listing(monkeypatch, kinesis, stream)
    with caplog.at_level(logging.INFO, logger="pyspark_aws_kinesis.sink"):
        writer, message = write(options, records)
        writer.commit([message])

    assert any(
        is_aggregated(r["Data"])
        for s in list_shards(kinesis, stream)
        for r in iterate_shard(kinesis, stream, s.shard_id)
    )
    assert Counter(read_like_the_kcl(kinesis, stream)) == Counter(data for data, _ in records)
    ours = spark.read.format("aws-kinesis").options(**options).load().select("data").collect()
    assert Counter(bytes(row.data) for row in ours) == Counter(data for data, _ in records)

    # The one aggregate (planned for the parent) landed on the child holding its first key; the records of the
    # other child went again. The count comes from the keys' MD5, not from the sink.
    first_low = hash_key_of(records[0][1]) < MIDDLE
    other_child = [data for data, key in records if (hash_key_of(key) < MIDDLE) != first_low]
    assert 0 < len(other_child) < len(records)
    assert len(handed) == 2  # listed once, then again after the answer named an unknown shard
    assert message.resent_records == len(other_child)
    assert f"re-sending the {len(other_child)} user records" in caplog.text
    assert f"{len(other_child)} records re-sent after their aggregates landed" in caplog.text
