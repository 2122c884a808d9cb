"""What a fresh Python process imports on the source's paths: only what that path needs.

Every Python process Spark starts for a query pays its imports: at ``load()`` (the schema and option checks), on
the driver (planning) and in each worker before its first record (bench/source_throughput.py prints the first
batch's breakdown). These run a path's imports in a fresh interpreter, as Spark's processes do.
"""

from __future__ import annotations

import json
import subprocess
import sys

from localaws.servers import project_root

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


# load(): the source's schema() checks every option, in a short-lived process that never calls AWS.
LOAD_PATH = """
import json, sys
from pyspark_aws_kinesis.datasource import KinesisDataSource
options = {"kinesis.streamName": "s", "kinesis.endpointUrl": "http://127.0.0.1:9"}
print(json.dumps({"meta": KinesisDataSource(options).schema(), "modules": sorted(sys.modules)}))
"""


def fresh_modules(code: str) -> tuple[str, set[str]]:
    """Run ``code`` in a fresh interpreter; what it printed last (``meta``) and every module it had imported."""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=project_root()
    ).stdout
    answer = json.loads(out.splitlines()[-1])
    return answer["meta"], set(answer["modules"])


def test_read_path_builds_its_client_without_boto3_or_protobuf() -> None:
    service, modules = fresh_modules(WORKER_PATH)
    assert service == "kinesis"
    # boto3 (and its s3transfer) and the KPL's protobuf messages cost a fresh worker ~0.4 s; plain records
    # need neither: the client is botocore's, the messages load with the first aggregate.
    assert not {name for name in modules if name.split(".")[0] in {"boto3", "s3transfer", "google", "aws_kinesis_agg"}}
    assert "botocore.client" in modules


def test_load_checks_options_without_botocores_parsers() -> None:
    schema, modules = fresh_modules(LOAD_PATH)
    assert schema.startswith("data BINARY")
    # botocore.parsers (and urllib3's connection stack behind it) is only needed where answers are parsed.
    assert "botocore.parsers" not in modules
