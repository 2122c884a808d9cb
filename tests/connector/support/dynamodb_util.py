"""The options of a DynamoDB metadata store on moto, for the tests that read with one."""

from __future__ import annotations


def dynamodb_options(moto_endpoint: str, table: str) -> dict[str, str]:
    return {
        "kinesis.metadataCommitterType": "DYNAMODB",
        "kinesis.dynamodb.tableName": table,
        "kinesis.dynamodb.endpointUrl": moto_endpoint,
        "kinesis.metadataRetryIntervalsMs": "1",
        "kinesis.metadataMaxRetryIntervalMs": "20",
    }
