"""Helpers for the metadata stores' tests: a shard read to record, stores of each kind (S3 on moto)."""

from __future__ import annotations

from localaws import LocalServer, aws_client
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY
from localaws.streams import unique_name
from pyspark_aws_kinesis.aws.settings import ClientSettings
from pyspark_aws_kinesis.fetch.reads import ShardRead
from pyspark_aws_kinesis.metadata.s3 import S3Store
from pyspark_aws_kinesis.positions import TRIM_HORIZON, WHOLE_RECORD, Position
from pyspark_aws_kinesis.retry import RetryPolicy


def _read(shard: str = "shardId-000000000000", records: int = 0, last: str | None = None) -> ShardRead:
    return ShardRead("stream-a", shard, Position(TRIM_HORIZON), records, last, 0 if last else WHOLE_RECORD)


FAST_RETRY = RetryPolicy(8, 1, 20)
SETTINGS = ClientSettings("us-east-1", access_key_id=DUMMY_ACCESS_KEY, secret_key=DUMMY_SECRET_KEY, retry=FAST_RETRY)


def _s3_store(endpoint_url: str, moto: LocalServer) -> S3Store:
    bucket = unique_name("meta").lower()
    aws_client("s3", moto.endpoint_url).create_bucket(Bucket=bucket)
    return S3Store(f"s3://{bucket}/some/prefix", SETTINGS, endpoint_url)
