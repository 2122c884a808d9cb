"""``metadata.location``: where the metadata store is, from the options (the source's, with its default path, and
the sink's notes of ``kinesis.sink.skipReplayedPartitions``, without one), and the store it opens."""

from __future__ import annotations

import os

import pytest

from pyspark_aws_kinesis.aws.settings import ClientSettings
from pyspark_aws_kinesis.metadata.dynamodb import DynamoDBStore, parse_store_uri
from pyspark_aws_kinesis.metadata.filesystem import LocalStore
from pyspark_aws_kinesis.metadata.location import StoreLocation
from pyspark_aws_kinesis.metadata.s3 import S3Store
from pyspark_aws_kinesis.options import OptionError, Side, parse_options
from pyspark_aws_kinesis.source.settings import SourceSettings

CLIENT = ClientSettings(region="eu-west-1")


def _settings(**options: str) -> SourceSettings:
    base = {"kinesis.streamName": "s", "kinesis.region": "eu-west-1", "kinesis.metadataCommitterType": "DYNAMODB"}
    return SourceSettings.from_options({k.lower(): v for k, v in {**base, **options}.items()})


def test_options_put_the_table_and_its_region_into_the_offsets() -> None:
    assert parse_store_uri(_settings(**{"kinesis.dynamodb.tableName": "meta"}).metadata_path) == ("meta", "eu-west-1")
    settings = _settings(**{"kinesis.dynamodb.tableName": "meta", "kinesis.dynamodb.region": "us-west-2"})
    assert settings.metadata_path == "dynamodb://meta?region=us-west-2"
    path = _settings(**{"kinesis.metadataCommitterType": "path"}).metadata_path
    assert path.endswith(f"aws-kinesis-metadata-{os.getuid()}")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, r"option kinesis.dynamodb.tableName is required with kinesis.metadataCommitterType=DYNAMODB"),
        ({"kinesis.metadataCommitterType": "REDIS"}, r"kinesis.metadataCommitterType='REDIS' is invalid: allowed"),
        (
            {"kinesis.metadataCommitterType": "HDFS", "kinesis.dynamodb.tableName": "meta"},
            r"option kinesis.dynamodb.tableName applies only to kinesis.metadataCommitterType=DYNAMODB",
        ),
        (
            {"kinesis.dynamodb.tableName": "meta", "kinesis.metadataPath": "/tmp/x"},
            r"option kinesis.metadataPath is not used with kinesis.metadataCommitterType=DYNAMODB",
        ),
        ({"kinesis.dynamodb.tableName": "a b"}, r"kinesis.dynamodb.tableName='a b' is invalid"),
        (
            {"kinesis.dynamodb.tableName": "meta", "kinesis.metadataRetryIntervalsMs": "50000"},
            r"kinesis.metadataRetryIntervalsMs=50000 must not exceed kinesis.metadataMaxRetryIntervalMs",
        ),
    ],
)
def test_bad_metadata_options_name_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        _settings(**options)


def _location(**options: str) -> StoreLocation:
    def no_default() -> str:
        raise OptionError("no default here")

    return StoreLocation.from_options(parse_options(options, Side.SINK), CLIENT, no_default)


def test_the_sink_reads_the_same_options_and_has_no_default_path() -> None:
    with pytest.raises(OptionError, match="no default here"):
        _location()
    located = _location(**{"kinesis.metadataPath": "s3://bucket/notes", "kinesis.metadataNumRetries": "2"})
    assert (located.path, located.retry.max_retries) == ("s3://bucket/notes", 2)
    table = _location(**{"kinesis.metadataCommitterType": "DYNAMODB", "kinesis.dynamodb.tableName": "notes"})
    assert table.path == "dynamodb://notes?region=eu-west-1"


def test_a_location_opens_the_store_it_names(tmp_path) -> None:
    assert isinstance(_location(**{"kinesis.metadataPath": str(tmp_path)}).open(CLIENT), LocalStore)
    assert isinstance(_location(**{"kinesis.metadataPath": "s3://bucket/notes"}).open(CLIENT), S3Store)
    table = _location(**{"kinesis.metadataCommitterType": "DYNAMODB", "kinesis.dynamodb.tableName": "notes"})
    assert isinstance(table.open(CLIENT), DynamoDBStore)
