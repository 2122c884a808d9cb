"""Guards against a query that would silently read the wrong rows: a metadata store the executors do not share
with the driver fails the first batch naming the option, and options that decide which rows exist are pinned
to the values the query started with."""

from __future__ import annotations

import pytest

from localaws import LocalServer
from localaws.streams import put_records
from pyspark_aws_kinesis.source.guards import ChangedOptionError
from pyspark_aws_kinesis.source.offsets import parse_offset
from pyspark_aws_kinesis.source.stream_reader import MetadataNotSharedError
from tests.connector.support.source_util import plan_first_batch, read_all, reader, roundtrip, run_batch, source_options


def _put(server: LocalServer, stream: str, count: int) -> None:
    put_records(server.client("kinesis"), stream, [(f"r-{i}".encode(), f"k{i}") for i in range(count)])


def test_executors_that_do_not_see_the_store_fail_naming_the_option(
    kinesalite: LocalServer, lite_stream, tmp_path, monkeypatch
) -> None:
    """A relative kinesis.metadataPath seen from another working directory: the executor's store is elsewhere."""
    stream = lite_stream(shards=1)
    _put(kinesalite, stream, 3)
    driver, executor = tmp_path / "driver", tmp_path / "executor"
    driver.mkdir()
    executor.mkdir()
    monkeypatch.chdir(driver)
    source = reader(source_options(kinesalite, stream, "meta"))
    start, end = plan_first_batch(source)
    partitions = list(source.partitions(start, end))
    monkeypatch.chdir(executor)
    with pytest.raises(
        MetadataNotSharedError,
        match=r"kinesis.metadataPath='meta' is not shared between driver and executors.*s3://.*hdfs://.*DYNAMODB",
    ):
        read_all(source, partitions)
    monkeypatch.chdir(driver)
    assert len(read_all(source, partitions)) == 3  # where the driver wrote, the executor sees the document


def test_offsets_from_before_the_source_document_still_read(
    kinesalite: LocalServer, lite_stream, tmp_path, monkeypatch
) -> None:
    stream = lite_stream(shards=1)
    _put(kinesalite, stream, 2)
    monkeypatch.chdir(tmp_path)
    source = reader(source_options(kinesalite, stream, "meta"))
    start = roundtrip(source.initialOffset())
    old = {key: value for key, value in roundtrip(source.latestOffset(start, None)).items() if key != "sourceDocument"}
    partitions = list(source.partitions(start, old))
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert len(read_all(source, partitions)) == 2


@pytest.mark.parametrize(
    ("option", "value", "recorded"),
    [
        ("kinesis.kpl.deaggregate", "false", "true"),
        ("kinesis.kpl.passThroughCorruptAggregates", "true", "false"),
        ("kinesis.streamName", "{stream},zz-another", "{stream}"),
    ],
)
def test_options_that_change_the_rows_cannot_change_on_restart(
    kinesalite: LocalServer, lite_stream, tmp_path, option: str, value: str, recorded: str
) -> None:
    stream = lite_stream(shards=1)
    _put(kinesalite, stream, 2)
    options = source_options(kinesalite, stream, tmp_path)
    source = reader(options)
    start = roundtrip(source.initialOffset())
    end, _rows = run_batch(source, start)
    value, recorded = value.format(stream=stream), recorded.format(stream=stream)
    restarted = reader({**options, option: value})
    expected = rf"option {option} is '{value}' but this query started with '{recorded}'.*new checkpointLocation"
    with pytest.raises(ChangedOptionError, match=expected):
        restarted.latestOffset(end, None)
    with pytest.raises(ChangedOptionError, match=expected):  # nor does a batch that runs again
        restarted.partitions(start, end)
    assert reader(options).latestOffset(end, None) is not None  # the same values still run


def test_a_query_started_by_stream_name_cannot_restart_by_arn(kinesis_mock: LocalServer, mock_stream, tmp_path) -> None:
    stream = mock_stream(shards=1)
    arn = kinesis_mock.client("kinesis").describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]
    options = source_options(kinesis_mock, stream, tmp_path)
    source = reader(options)
    end, _rows = run_batch(source, roundtrip(source.initialOffset()))
    by_arn = {key: value for key, value in options.items() if key != "kinesis.streamName"}
    restarted = reader({**by_arn, "kinesis.streamARN": arn["StreamARN"]})
    expected = rf"option kinesis.streamARN is set but this query started with kinesis.streamName='{stream}'"
    with pytest.raises(ChangedOptionError, match=expected):
        restarted.latestOffset(end, None)


def test_offsets_from_before_pinning_adopt_the_current_values(kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    stream = lite_stream(shards=1)
    options = source_options(kinesalite, stream, tmp_path)
    source = reader(options)
    start = roundtrip(source.initialOffset())
    old = {key: value for key, value in start.items() if key != "pinned"}
    _put(kinesalite, stream, 2)
    changed = reader({**options, "kinesis.kpl.deaggregate": "false"})
    planned = parse_offset(roundtrip(changed.latestOffset(old, None)))
    assert planned.pinned is not None and planned.pinned["kinesis.kpl.deaggregate"] == "false"
