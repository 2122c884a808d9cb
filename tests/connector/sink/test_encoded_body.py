"""``pyspark_aws_kinesis.sink.encoded_body``: a PutRecords body encoded by msgspec rides through a botocore client in
place of a one-entry placeholder, its successful answer comes back undecoded, and the client's other calls stay
botocore's. No server: botocore's ``before-send`` event records each request and answers it."""

from __future__ import annotations

import base64
import json
from typing import Any

import botocore.session
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import ClientError

from pyspark_aws_kinesis.sink.encoded_body import (
    RAW_ANSWER,
    PutResult,
    call_params,
    decode_answer,
    encode_body,
    prepare_client,
)
from pyspark_aws_kinesis.sink.entries import Entry

ENTRIES = [Entry(b"\x00binary\xff", "key-0"), Entry(b"text", "key-1", explicit_hash_key="42")]
ANSWER = {
    "FailedRecordCount": 1,
    "Records": [
        {"SequenceNumber": "1", "ShardId": "shardId-000000000000"},
        {"ErrorCode": "ProvisionedThroughputExceededException", "ErrorMessage": "Rate exceeded"},
    ],
}


class _Raw:
    def __init__(self, body: bytes):
        self.body = body

    def stream(self, **_: Any):
        yield self.body


class _Wire:
    """Records each request's body and answers it with ``status`` and ``answer``."""

    def __init__(self, client: Any, status: int = 200, answer: dict | None = None):
        self.bodies: list[bytes] = []
        self.status, self.answer = status, answer if answer is not None else ANSWER
        client.meta.events.register("before-send.kinesis", self.send)

    def send(self, request: Any, **_: Any) -> AWSResponse:
        self.bodies.append(request.body if isinstance(request.body, bytes) else request.body.encode())
        body = json.dumps(self.answer).encode()
        return AWSResponse(request.url, self.status, {"content-type": "application/x-amz-json-1.1"}, _Raw(body))


def _client() -> Any:
    return botocore.session.get_session().create_client(
        "kinesis",
        region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9",
        aws_access_key_id="AKIDTEST",
        aws_secret_access_key="secret",
        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}),
    )


def test_the_body_is_the_put_records_json_with_base64_data() -> None:
    body = json.loads(encode_body("orders", ENTRIES))
    assert body == {
        "StreamName": "orders",
        "Records": [
            {"Data": base64.b64encode(b"\x00binary\xff").decode(), "PartitionKey": "key-0"},
            {"Data": base64.b64encode(b"text").decode(), "PartitionKey": "key-1", "ExplicitHashKey": "42"},
        ],
    }


def test_an_answer_decodes_to_one_result_per_entry_in_order() -> None:
    results = decode_answer(json.dumps(ANSWER).encode())
    assert results == [
        PutResult(SequenceNumber="1", ShardId="shardId-000000000000"),
        PutResult(ErrorCode="ProvisionedThroughputExceededException", ErrorMessage="Rate exceeded"),
    ]


def test_a_prepared_client_sends_our_body_and_hands_the_answer_back_undecoded() -> None:
    client = prepare_client(prepare_client(_client()))  # idempotent
    wire = _Wire(client)
    answer = client.put_records(**call_params("orders", ENTRIES))
    assert wire.bodies == [encode_body("orders", ENTRIES)]
    assert decode_answer(answer[RAW_ANSWER])[1].ErrorCode == "ProvisionedThroughputExceededException"


def test_the_clients_other_put_records_stay_botocores() -> None:
    client = prepare_client(_client())
    wire = _Wire(client)
    answer = client.put_records(StreamName="orders", Records=[{"Data": b"x", "PartitionKey": "k"}])
    assert json.loads(wire.bodies[0])["Records"] == [{"Data": "eA==", "PartitionKey": "k"}]
    assert RAW_ANSWER not in answer and answer["FailedRecordCount"] == 1


def test_an_error_answer_still_raises_the_aws_error_code() -> None:
    client = prepare_client(_client())
    _Wire(client, 400, {"__type": "ResourceNotFoundException", "message": "Stream orders not found"})
    with pytest.raises(ClientError) as info:
        client.put_records(**call_params("orders", ENTRIES))
    assert info.value.response["Error"]["Code"] == "ResourceNotFoundException"
