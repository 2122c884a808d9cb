"""``bench.decode.floors``: the MD5 and the JSON + base64 a body of KPL aggregates costs any decoder."""

from __future__ import annotations

import base64
import json

from bench.decode import floors
from pyspark_aws_kinesis.kpl import Aggregator


def _body_of_aggregates(count: int) -> bytes:
    aggregates = []
    for start in range(count):
        aggregator = Aggregator()
        for index in range(3):  # three user records: an aggregate, not a lone plain record
            aggregator.add(f"user-{start}-{index}".encode(), f"key-{index}")
        aggregates.append(aggregator.flush().data)
    records = [
        {"Data": base64.b64encode(data).decode(), "PartitionKey": "k", "SequenceNumber": str(i)}
        for i, data in enumerate(aggregates)
    ]
    return json.dumps({"Records": records, "MillisBehindLatest": 0}).encode()


def test_each_floor_covers_every_aggregate_of_the_body() -> None:
    body = _body_of_aggregates(4)
    runs = floors(body)
    assert runs["floor: MD5 of every aggregate alone"]() == 4
    assert runs["floor: JSON + base64 of the body alone"]() == 4
    assert runs["floor: both (no decode can cost less)"]() == (4, 4)
