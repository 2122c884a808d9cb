"""aws-kinesis-agg, the reference reader of KPL aggregates, as the tests call it: it takes a Lambda-style event, so
a GetRecords record is dressed as one (``lambda_event``) and its user records taken out (``agg_user_records``)."""

from __future__ import annotations

import base64
from typing import Any

from aws_kinesis_agg.deaggregator import iter_deaggregate_records


def lambda_event(record: dict[str, Any], arrival_us: int = 0) -> dict[str, Any]:
    """A GetRecords record (botocore's parse: ``Data`` as bytes) as the Kinesis event Lambda would pass."""
    return {
        "kinesis": {
            "data": base64.b64encode(record["Data"]).decode(),
            "partitionKey": record["PartitionKey"],
            "sequenceNumber": record["SequenceNumber"],
            "kinesisSchemaVersion": "1.0",
            "approximateArrivalTimestamp": arrival_us,
        }
    }


def agg_user_records(record: dict[str, Any], arrival_us: int = 0) -> list[dict[str, Any]]:
    """The record's user records by aws-kinesis-agg: each the ``kinesis`` part of its event (``data`` base64)."""
    return [user["kinesis"] for user in iter_deaggregate_records(lambda_event(record, arrival_us))]
