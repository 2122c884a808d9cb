"""``pyspark_aws_kinesis.aws.direct_get_records``: the reader client's GetRecords, signed and sent without botocore's
per-call machinery, says and answers what botocore's own ``get_records`` would: the same signature (checked with
botocore's signer), the same URL for a stream's ARN, the same records, the same errors; hooks still answer."""

from __future__ import annotations

import secrets
from typing import Any

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest, AWSResponse
from botocore.credentials import Credentials
from botocore.exceptions import ClientError, ParamValidationError

from localaws import LocalServer
from pyspark_aws_kinesis.aws.clients import RAW_BODY, kinesis_reader_client
from pyspark_aws_kinesis.aws.direct_get_records import DirectGetRecords
from pyspark_aws_kinesis.aws.settings import ClientSettings

SHARD = "shardId-000000000000"
ARN = "arn:aws:kinesis:eu-west-1:123456789012:stream/shared"


class _Body:
    def __init__(self, data: bytes):
        self.data = data

    def stream(self, **_: Any):
        yield self.data


def _settings(endpoint_url: str | None, token: str | None = None, region: str = "us-east-1") -> ClientSettings:
    """Keys no other test used: the process's client cache makes a new client."""
    return ClientSettings(region, endpoint_url, f"AKID{secrets.token_hex(6).upper()}", "secret/key+x", token)


def _sent(kinesis: Any, answer: bytes | None = None) -> list[Any]:
    """Every request ``kinesis`` sends from now on; answered with ``answer`` (200) in-process when given."""
    sent: list[Any] = []

    def record(request: Any, **_: Any) -> AWSResponse | None:
        sent.append(request)
        return None if answer is None else AWSResponse(request.url, 200, {}, _Body(answer))

    kinesis.meta.events.register("before-send.kinesis", record)
    return sent


def _botocore_get_records(kinesis: Any, **params: Any) -> dict[str, Any]:
    return type(kinesis).get_records(kinesis, **params)


def _botocore_signature(request: Any, settings: ClientSettings, region: str) -> str:
    """The Authorization botocore's SigV4 signer computes for ``request`` at the time the request names."""
    unsigned = {k: v.decode() for k, v in request.headers.items() if k not in ("Authorization", "Content-Length")}
    again = AWSRequest(method="POST", url=request.url, data=request.body, headers=unsigned)
    again.context["timestamp"] = unsigned["X-Amz-Date"]
    signer = SigV4Auth(
        Credentials(settings.access_key_id, settings.secret_key, settings.session_token), "kinesis", region
    )
    canonical = signer.canonical_request(again)
    signature = signer.signature(signer.string_to_sign(again, canonical), again)
    scope = signer.scope(again)
    names = signer.signed_headers(signer.headers_to_sign(again))
    return f"AWS4-HMAC-SHA256 Credential={scope}, SignedHeaders={names}, Signature={signature}"


def test_the_reader_client_takes_the_direct_path() -> None:
    assert isinstance(kinesis_reader_client(_settings("http://127.0.0.1:9")).get_records, DirectGetRecords)


@pytest.mark.parametrize(
    "endpoint, token",
    [
        ("http://127.0.0.1:4567", None),
        ("http://127.0.0.1:4567", "session/token"),
        ("https://Kinesis.example:443", None),
    ],
    ids=["port", "session-token", "default-port"],
)
def test_the_signature_is_botocores(endpoint: str, token: str | None) -> None:
    settings = _settings(endpoint, token)
    kinesis = kinesis_reader_client(settings)
    sent = _sent(kinesis, answer=b"{}")
    kinesis.get_records(ShardIterator="AAAA/iterator+with=odd chars", Limit=7)
    (request,) = sent
    assert request.headers["Authorization"].decode() == _botocore_signature(request, settings, "us-east-1")
    assert ("X-Amz-Security-Token" in request.headers) == (token is not None)


def test_a_stream_arn_goes_where_botocore_sends_it_signed_for_its_region() -> None:
    settings = _settings(None, region="eu-west-1")
    kinesis = kinesis_reader_client(settings)
    sent = _sent(kinesis, answer=b"{}")
    kinesis.get_records(ShardIterator="it", StreamARN=ARN, Limit=1)
    _botocore_get_records(kinesis, ShardIterator="it", StreamARN=ARN, Limit=1)
    ours, botocores = sent
    assert ours.url == botocores.url == "https://123456789012.data-kinesis.eu-west-1.amazonaws.com/"
    assert ours.headers["Authorization"].decode() == _botocore_signature(ours, settings, "eu-west-1")
    assert ours.headers["User-Agent"] == botocores.headers["User-Agent"]


def test_records_and_errors_are_botocores(kinesalite: LocalServer, lite_stream) -> None:
    stream = lite_stream(shards=1)
    server = kinesalite.client("kinesis")
    for n in range(3):
        server.put_record(StreamName=stream, Data=f"r{n}".encode(), PartitionKey="k")
    kinesis = kinesis_reader_client(_settings(kinesalite.endpoint_url))
    iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId=SHARD, ShardIteratorType="TRIM_HORIZON")
    ours = kinesis.get_records(ShardIterator=iterator["ShardIterator"], Limit=2)
    botocores = _botocore_get_records(kinesis, ShardIterator=iterator["ShardIterator"], Limit=2)
    assert b'"Records"' in ours[RAW_BODY]
    assert ours[RAW_BODY].split(b'"NextShardIterator"')[0] == botocores[RAW_BODY].split(b'"NextShardIterator"')[0]

    bad = iterator["ShardIterator"][:-8] + "AAAAAAAA"
    raised = []
    for call in (kinesis.get_records, lambda **p: _botocore_get_records(kinesis, **p)):
        with pytest.raises(ClientError) as refused:
            call(ShardIterator=bad, Limit=1)
        raised.append(refused.value)
    ours_error, botocores_error = raised
    assert type(ours_error) is type(botocores_error)
    assert ours_error.response["Error"] == botocores_error.response["Error"]
    assert ours_error.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_hooks_still_see_and_answer_the_call() -> None:
    kinesis = kinesis_reader_client(_settings("http://127.0.0.1:9"))
    called: list[str] = []
    kinesis.meta.events.register("before-call.kinesis.GetRecords", lambda **_: called.append("before-call"))
    sent = _sent(kinesis, answer=b'{"Records":[],"MillisBehindLatest":0}')  # nothing listens on port 9
    answer = kinesis.get_records(ShardIterator="it", Limit=1)
    assert answer[RAW_BODY] == b'{"Records":[],"MillisBehindLatest":0}'
    assert called == ["before-call"] and len(sent) == 1


def test_what_it_does_not_expect_goes_to_botocore() -> None:
    kinesis = kinesis_reader_client(_settings("http://127.0.0.1:9"))
    with pytest.raises(ParamValidationError):  # botocore's own validation, which the direct path skips
        kinesis.get_records(ShardIterator="it", Limit="1")
