"""The metadata store's options (``pyspark_aws_kinesis.options.metadata``) as the registry parses them: defaults,
bounds, and a well-formed DynamoDB table name."""

from __future__ import annotations

import pytest

from pyspark_aws_kinesis import options as opts
from pyspark_aws_kinesis.options import OptionError, Side, parse_options

BASE = {"kinesis.streamName": "s", "kinesis.region": "us-east-1"}


def _parse(**extra: str):
    return parse_options({**BASE, **extra}, Side.SOURCE)


def test_the_defaults() -> None:
    parsed = _parse()
    assert parsed[opts.METADATA_COMMITTER_TYPE.key] == "HDFS"
    assert parsed[opts.METADATA_PATH.key] is None and parsed[opts.DYNAMODB_TABLE_NAME.key] is None
    assert parsed[opts.METADATA_NUM_RETRIES.key] == 5
    assert (parsed[opts.METADATA_RETRY_INTERVALS_MS.key], parsed[opts.METADATA_MAX_RETRY_INTERVAL_MS.key]) == (
        1000,
        10000,
    )
    assert parsed[opts.MIN_BATCHES_TO_RETAIN.key] == 100


def test_the_sink_reads_where_the_store_is_and_only_the_source_its_retention() -> None:
    """The sink keeps the notes of kinesis.sink.skipReplayedPartitions in the same store (sink.replay)."""
    shared = [
        opts.METADATA_PATH,
        opts.METADATA_S3_ENDPOINT_URL,
        opts.METADATA_COMMITTER_TYPE,
        opts.DYNAMODB_TABLE_NAME,
        opts.DYNAMODB_ENDPOINT_URL,
        opts.DYNAMODB_REGION,
        opts.METADATA_NUM_RETRIES,
        opts.METADATA_RETRY_INTERVALS_MS,
        opts.METADATA_MAX_RETRY_INTERVAL_MS,
    ]
    assert {option.side for option in shared} == {Side.BOTH}
    assert opts.MIN_BATCHES_TO_RETAIN.side == Side.SOURCE


@pytest.mark.parametrize("name", ["orders_meta", "a.b-c", "x" * 255])
def test_a_table_name_of_3_to_255_allowed_characters_is_taken(name: str) -> None:
    assert _parse(**{"kinesis.dynamodb.tableName": name})[opts.DYNAMODB_TABLE_NAME.key] == name


@pytest.mark.parametrize("name", ["ab", "x" * 256, "has space", "slash/no", "é-table"])
def test_another_table_name_is_refused_naming_what_is_allowed(name: str) -> None:
    with pytest.raises(OptionError, match=r"kinesis\.dynamodb\.tableName=.* is invalid .*3-255 characters"):
        _parse(**{"kinesis.dynamodb.tableName": name})


def test_the_committer_type_is_one_of_three_in_any_case() -> None:
    assert _parse(**{"kinesis.metadataCommitterType": "dynamodb"})[opts.METADATA_COMMITTER_TYPE.key] == "DYNAMODB"
    with pytest.raises(OptionError, match=r"kinesis\.metadataCommitterType='S3' is invalid"):
        _parse(**{"kinesis.metadataCommitterType": "S3"})


def test_at_least_two_batches_are_kept() -> None:
    assert _parse(**{"kinesis.minBatchesToRetain": "2"})[opts.MIN_BATCHES_TO_RETAIN.key] == 2
    with pytest.raises(OptionError, match=r"kinesis\.minBatchesToRetain='1' is invalid"):
        _parse(**{"kinesis.minBatchesToRetain": "1"})
