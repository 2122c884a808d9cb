"""The aws-kinesis sink end to end: Spark batch and streaming writes into kinesalite, read back with boto3."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from localaws import LocalServer
from localaws.fault_proxy import FaultProxy, Faults
from localaws.streams import iterate_shard, list_shard_ids, read_stream
from pyspark_aws_kinesis.kpl import deaggregate, hash_key_of, is_aggregated
from tests.connector.support.sink_util import sink_options

FORMAT = "aws-kinesis"


def user_records(kinesis, stream: str) -> list[tuple[str, bytes, str]]:
    """(shard id, data, partition key) of every user record in the stream, aggregates unpacked, in shard order."""
    found = []
    for shard_id in list_shard_ids(kinesis, stream):
        for record in iterate_shard(kinesis, stream, shard_id):
            if is_aggregated(record["Data"]):
                found += [(shard_id, r.data, r.partition_key) for r in deaggregate(record["Data"])]
            else:
                found.append((shard_id, record["Data"], record["PartitionKey"]))
    return found


def shard_finder(kinesis, stream: str):
    """A function from partition key to the id of the shard whose hash-key range holds it."""
    ranges = [
        (int(s["HashKeyRange"]["StartingHashKey"]), int(s["HashKeyRange"]["EndingHashKey"]), s["ShardId"])
        for s in kinesis.list_shards(StreamName=stream)["Shards"]
    ]

    def shard_of(partition_key: str) -> str:
        key = hash_key_of(partition_key)
        (shard_id,) = [shard_id for start, end, shard_id in ranges if start <= key <= end]
        return shard_id

    return shard_of


def rows_frame(spark, count: int, keys: int = 20, partitions: int = 2):
    return spark.range(count, numPartitions=partitions).selectExpr(
        "cast(concat('row-', id) as binary) as data", f"concat('key-', id % {keys}) as partitionKey", "id"
    )


def expected_rows(count: int, keys: int = 20) -> Counter:
    return Counter((f"row-{i}".encode(), f"key-{i % keys}") for i in range(count))


# --- batch writes -----------------------------------------------------------------------------------------


def test_batch_write_aggregates_per_shard_and_every_row_arrives(spark, kinesalite: LocalServer, lite_stream) -> None:
    stream = lite_stream(shards=3)
    kinesis = kinesalite.client("kinesis")
    rows_frame(spark, 3000).write.format(FORMAT).options(**sink_options(kinesalite.endpoint_url, stream)).mode(
        "append"
    ).save()
    stored = user_records(kinesis, stream)
    assert Counter((data, key) for _, data, key in stored) == expected_rows(3000)
    assert len(read_stream(kinesis, stream)) < 20  # thousands of rows in a handful of aggregates
    shard_of = shard_finder(kinesis, stream)
    for shard_id, _, key in stored:  # each row sits on the shard its key hashes to
        assert shard_id == shard_of(key)
    for key in {key for _, _, key in stored}:  # rows of one key keep their order (within each task)
        ids = [int(data.decode()[4:]) for _, data, k in stored if k == key]
        assert [i for i in ids if i < 1500] == sorted(i for i in ids if i < 1500)


def test_batch_write_plain_records_with_string_data_and_explicit_hash_keys(
    spark, kinesalite: LocalServer, lite_stream
) -> None:
    stream = lite_stream(shards=2)
    kinesis = kinesalite.client("kinesis")
    frame = spark.range(40, numPartitions=2).selectExpr(
        "concat('text-', id) as data",
        "'same-key' as partitionKey",
        # Even rows go to the top of the hash range, odd rows follow their key.
        f"case when id % 2 = 0 then '{2**128 - 1}' end as explicitHashKey",
    )
    plain = {"kinesis.sink.aggregationEnabled": "false"}
    frame.write.format(FORMAT).options(**sink_options(kinesalite.endpoint_url, stream, **plain)).mode("append").save()
    records = read_stream(kinesis, stream)
    assert len(records) == 40 and not any(is_aggregated(r["Data"]) for r in records)
    top_shard = list_shard_ids(kinesis, stream)[-1]
    on_top = {data for shard, data, _ in user_records(kinesis, stream) if shard == top_shard}
    assert {f"text-{i}".encode() for i in range(0, 40, 2)} <= on_top


def test_rows_go_to_the_stream_their_streamName_column_names(spark, kinesalite: LocalServer, lite_stream) -> None:
    first, second = lite_stream(shards=1), lite_stream(shards=1)
    kinesis = kinesalite.client("kinesis")
    frame = rows_frame(spark, 300).selectExpr(
        "data", "partitionKey", f"case when id % 3 = 0 then '{first}' else '{second}' end as streamName"
    )
    frame.write.format(FORMAT).options(**sink_options(kinesalite.endpoint_url, None)).mode("append").save()
    to_first = Counter((data, key) for _, data, key in user_records(kinesis, first))
    to_second = Counter((data, key) for _, data, key in user_records(kinesis, second))
    assert to_first == Counter({row: 1 for row in expected_rows(300) if int(row[0][4:]) % 3 == 0})
    assert to_first + to_second == expected_rows(300)


def test_the_stream_option_overrides_the_streamName_column(spark, kinesalite: LocalServer, lite_stream) -> None:
    target, elsewhere = lite_stream(shards=1), lite_stream(shards=1)
    kinesis = kinesalite.client("kinesis")
    frame = rows_frame(spark, 50).selectExpr("data", "partitionKey", f"'{elsewhere}' as streamName")
    frame.write.format(FORMAT).options(**sink_options(kinesalite.endpoint_url, target)).mode("append").save()
    assert Counter((data, key) for _, data, key in user_records(kinesis, target)) == expected_rows(50)
    assert read_stream(kinesis, elsewhere) == []


@pytest.mark.parametrize("aggregation", ["false", "true"])
def test_partially_failed_calls_still_deliver_every_row_exactly_once(
    spark, kinesalite: LocalServer, lite_stream, aggregation: str
) -> None:
    stream = lite_stream(shards=2)
    # Big rows so that aggregation still makes many Kinesis records for the proxy to fail.
    frame = spark.range(1200, numPartitions=2).selectExpr(
        "cast(concat('row-', id, '-', repeat('x', 20000)) as binary) as data", "concat('key-', id % 50) as partitionKey"
    )
    with FaultProxy(kinesalite.endpoint_url, Faults(put_records_entry_failure_rate=0.3), seed=3) as proxy:
        # Two tasks share the proxy's random draws, so the run is not repeatable: a budget of 10 stalled rounds
        # makes "the last few entries failed 11 times in a row" (0.3**11) practically impossible.
        patient = {
            "kinesis.sink.aggregationEnabled": aggregation,
            "kinesis.clientNumRetries": "10",
            "kinesis.sink.maxConnections": "3",  # retries on parallel call sequences too
        }
        options = sink_options(proxy.endpoint_url, stream, **patient)
        frame.write.format(FORMAT).options(**options).mode("append").save()
        failed = proxy.stats["failed_entries"]
    stored = Counter(data.split(b"-x")[0] for _, data, _ in user_records(kinesalite.client("kinesis"), stream))
    assert failed > 5
    assert stored == Counter(f"row-{i}".encode() for i in range(1200))


# --- streaming writes -------------------------------------------------------------------------------------


def test_streaming_write_delivers_each_micro_batch(spark, kinesalite: LocalServer, lite_stream, tmp_path: Path) -> None:
    stream = lite_stream(shards=2)
    source = tmp_path / "in"
    source.mkdir()
    for part in range(2):
        lines = [json.dumps({"data": f"event-{part}-{i}", "partitionKey": f"user-{i % 7}"}) for i in range(250)]
        (source / f"part-{part}.json").write_text("\n".join(lines))
    query = (
        spark.readStream.schema("data string, partitionKey string")
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .writeStream.format(FORMAT)
        .options(**sink_options(kinesalite.endpoint_url, stream))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(90)
    assert query.exception() is None
    stored = Counter((data.decode(), key) for _, data, key in user_records(kinesalite.client("kinesis"), stream))
    assert stored == Counter((f"event-{p}-{i}", f"user-{i % 7}") for p in range(2) for i in range(250))
    assert [progress["numInputRows"] for progress in query.recentProgress if progress["numInputRows"]] == [250, 250]


# --- refusals ---------------------------------------------------------------------------------------------


def _write_error(frame, options: dict[str, str]) -> str:
    with pytest.raises(Exception) as info:
        frame.write.format(FORMAT).options(**options).mode("append").save()
    return str(info.value)


def test_bad_rows_fail_the_task_before_anything_is_sent(spark, kinesalite: LocalServer, lite_stream) -> None:
    stream = lite_stream(shards=1)
    frame = spark.range(10, numPartitions=1).selectExpr(
        "cast(id as string) as data", "case when id in (2, 5, 7) then null else 'k' end as partitionKey"
    )
    message = _write_error(frame, sink_options(kinesalite.endpoint_url, stream))
    assert "column 'partitionKey' is null or empty in 3 of 10 rows" in message
    assert read_stream(kinesalite.client("kinesis"), stream) == []


def test_a_bad_row_fails_the_write_and_only_its_own_task_sends_nothing(
    spark, kinesalite: LocalServer, lite_stream
) -> None:
    """What docs/sink.md says a failed write leaves behind: the task with the null key sends none of its rows;
    the other task's rows may be stored (all, some or none: tasks run side by side), each at most once."""
    stream = lite_stream(shards=1)
    frame = spark.range(20, numPartitions=2).selectExpr(  # task 0: ids 0-9, task 1: ids 10-19
        "concat(if(id >= 10, 'bad-task-', 'good-task-'), id) as data",
        "if(id = 15, null, cast(id as string)) as partitionKey",
    )
    message = _write_error(frame, sink_options(kinesalite.endpoint_url, stream))
    assert "Nothing was sent to Kinesis by this task: column 'partitionKey' is null or empty in 1 of 10 rows" in message
    stored = Counter(data.decode() for _, data, _ in user_records(kinesalite.client("kinesis"), stream))
    assert not [data for data in stored if data.startswith("bad-task-")], stored
    assert set(stored) <= {f"good-task-{i}" for i in range(10)} and set(stored.values()) <= {1}, stored


def test_a_record_over_the_streams_1_mib_fails_before_anything_is_sent(
    spark, kinesalite: LocalServer, lite_stream
) -> None:
    stream = lite_stream(shards=1)
    frame = spark.range(3, numPartitions=1).selectExpr(
        "case when id = 1 then repeat('x', 1048576) else 'small' end as data", "'k' as partitionKey"
    )
    message = _write_error(frame, sink_options(kinesalite.endpoint_url, stream))
    assert (
        "Nothing was sent to Kinesis by this task: a record of 1048577 bytes (data + partition key) is over the "
        f"maximum record size of stream '{stream}', 1048576 bytes (1024 KiB); the stream's owner can raise it"
    ) in message
    assert read_stream(kinesalite.client("kinesis"), stream) == []


def test_a_missing_or_mistyped_column_fails_when_the_query_starts(spark, kinesalite: LocalServer) -> None:
    options = sink_options(kinesalite.endpoint_url, "never-used")
    message = _write_error(
        spark.range(3).selectExpr("cast(cast(id as string) as binary) as data", "id as key"), options
    )
    assert "column 'partitionKey' is missing" in message
    message = _write_error(spark.range(3).selectExpr("id as data", "'k' as partitionKey"), options)
    assert "column 'data' has type bigint, it must be binary or string" in message


@pytest.mark.parametrize("aggregation", ["true", "false"])
def test_a_missing_stream_fails_with_its_name(spark, kinesalite: LocalServer, aggregation: str) -> None:
    options = sink_options(
        kinesalite.endpoint_url, "no-such-stream", **{"kinesis.sink.aggregationEnabled": aggregation}
    )
    message = _write_error(rows_frame(spark, 5, partitions=1), options)
    assert "'no-such-stream'" in message and "does not exist" in message


def test_a_bad_sink_option_is_named(spark, kinesalite: LocalServer) -> None:
    options = sink_options(kinesalite.endpoint_url, "s", **{"kinesis.sink.maxConnections": "0"})
    message = _write_error(rows_frame(spark, 5), options)
    assert "option kinesis.sink.maxConnections='0' is invalid" in message
    # the connector's line right under Spark's header and one frame of traceback
    assert any("OptionError: option kinesis.sink" in line for line in message.splitlines()[:4]), message[:3000]
