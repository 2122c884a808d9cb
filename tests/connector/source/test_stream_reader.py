"""``pyspark_aws_kinesis.source.stream_reader``: what a fresh worker process imports on its way to its first
GetRecords (the reader module, the reader client, a page decoded): only what that path needs.

Every Python process Spark starts for a query pays its imports (bench/source_throughput.py prints the first
batch's breakdown). The test runs the path's imports in a fresh interpreter, as Spark's processes do."""

from __future__ import annotations

from tests.connector.support.fresh_process import fresh_modules

# A worker's path to its first GetRecords: the reader module, the reader client, a plain page decoded.
WORKER_PATH = """
import json, sys
import pyspark_aws_kinesis.source.stream_reader
from pyspark_aws_kinesis.aws.settings import ClientSettings
from pyspark_aws_kinesis.aws.clients import kinesis_reader_client
from pyspark_aws_kinesis.fetch.decode import ShardContext, decode_get_records

settings = ClientSettings(region="us-east-1", endpoint_url="http://127.0.0.1:9", access_key_id="a", secret_key="b")
client = kinesis_reader_client(settings)
body = json.dumps({"Records": [{"Data": "aGk=", "PartitionKey": "k", "SequenceNumber": "1"}], "NextShardIterator": "i"})
page = decode_get_records(body, ShardContext("s", "shardId-0", 0, 2**128 - 1))
assert page.data == [b"hi"], page.data
print(json.dumps({"meta": client.meta.service_model.service_name, "modules": sorted(sys.modules)}))
"""


def test_read_path_builds_its_client_without_boto3_or_protobuf() -> None:
    service, modules = fresh_modules(WORKER_PATH)
    assert service == "kinesis"
    # boto3 (and its s3transfer) and the KPL's protobuf messages cost a fresh worker ~0.4 s; plain records
    # need neither: the client is botocore's, the messages load with the first aggregate.
    assert not {name for name in modules if name.split(".")[0] in {"boto3", "s3transfer", "google", "aws_kinesis_agg"}}
    assert "botocore.client" in modules
