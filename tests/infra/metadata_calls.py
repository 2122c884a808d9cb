"""What the connector's DynamoDB metadata store really calls, recorded from a source run against moto.

The run drives the stream reader as Spark does, on a table made beforehand (the stack creates the table, the
job never does; its keys are checked against the stack's): batches planned, read, read again (a retried
task), committed and purged (``kinesis.minBatchesToRetain``), a pending offset of pyspark 4.0.2 resolved and
looked up again by a restarted reader. A recording proxy in front of moto counts each DynamoDB action; the IAM
test compares the instance role's table statement with ``dynamodb:<action>`` of each one.
"""

from __future__ import annotations

from infra.metadata import PARTITION_KEY, SORT_KEY
from localaws import LocalServer
from localaws.fault_proxy import FaultProxy
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY
from localaws.streams import create_stream, put_records, unique_name
from pyspark_aws_kinesis.aws.settings import ClientSettings
from pyspark_aws_kinesis.metadata.dynamodb import DynamoDBStore
from tests.connector.support.source_util import read_all, reader, roundtrip, run_batch, source_options


def _create_table(moto: LocalServer, table: str) -> None:
    """The table as the metadata stack makes it, before the recorded run (the job never creates it)."""
    settings = ClientSettings("us-east-1", moto.endpoint_url, DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY)
    DynamoDBStore(table, settings).ensure_table()
    key_schema = moto.client("dynamodb").describe_table(TableName=table)["Table"]["KeySchema"]
    assert [key["AttributeName"] for key in key_schema] == [PARTITION_KEY, SORT_KEY]  # the stack's keys


def record_table_actions(moto: LocalServer, kinesalite: LocalServer) -> set[str]:
    """``dynamodb:<Action>`` for every action the source called on the table during a representative run."""
    table = unique_name("meta")
    _create_table(moto, table)
    stream = create_stream(kinesalite.client("kinesis"), unique_name("iam"), 2)
    with FaultProxy(moto.endpoint_url) as proxy:
        options = source_options(kinesalite, stream, "")
        del options["kinesis.metadataPath"]
        options |= {
            "kinesis.metadataCommitterType": "DYNAMODB",
            "kinesis.dynamodb.tableName": table,
            "kinesis.dynamodb.endpointUrl": proxy.endpoint_url,
            "kinesis.minBatchesToRetain": "2",
            "kinesis.maxFetchRecordsPerShard": "2",
        }
        put_records(kinesalite.client("kinesis"), stream, [(f"r{i}".encode(), f"k{i}") for i in range(12)])
        source = reader(options)
        start = roundtrip(source.initialOffset())
        for _ in range(3):  # the third commit purges the first batch
            end = roundtrip(source.latestOffset(start, None))
            partitions = list(source.partitions(start, end))
            read_all(source, partitions)
            read_all(source, partitions)  # a retried task replays the recorded range
            source.commit(end)
            start = end
        # pyspark 4.0.2 after a restart: a pending offset, resolved once and looked up by the next process.
        restarted = reader(options)
        pending = roundtrip(restarted.latestOffset())
        restarted.commit(start)
        read_all(restarted, list(restarted.partitions(start, pending)))
        again = reader(options)
        run_batch(again, pending)
    return {f"dynamodb:{action}" for action in proxy.calls}
