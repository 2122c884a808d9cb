"""PutRecords bodies encoded, and answers read, with msgspec rather than botocore, whose validation, base64 and
parsing of each entry in Python cost far more CPU (docs/sink.md, "Performance"). ``put_records.put_all`` prepares
its client with ``prepare_client`` and sends each call with ``call_params``: our body rides in the private
``ENCODED_BODY`` parameter beside a one-entry placeholder, botocore hooks swap it in before the request is signed
and hand a successful answer back undecoded (``RAW_ANSWER``) for ``decode_answer``. Signing, endpoints, retries and
error answers stay botocore's; the client's other calls (someone else's PutRecords included) are untouched.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

import msgspec

from ..stream_ids import stream_param
from .entries import Entry

ENCODED_BODY = "ConnectorEncodedBody"  # private put_records parameter: the request body, already encoded
_PLACEHOLDER = [{"Data": b"", "PartitionKey": "-"}]  # what botocore validates and serializes in its place
RAW_ANSWER = "ConnectorRawAnswer"  # where such a call's answer carries its undecoded body
_BODY_ENCODER = msgspec.json.Encoder()
# Whether the PutRecords call in progress on this thread carries our body: botocore builds, sends and parses a
# call on the thread that made it, and its before-parse hook is not told the call's context.
_call = threading.local()


class PutResult(msgspec.Struct, gc=False):
    """One entry of a PutRecords answer: stored (SequenceNumber, ShardId) or failed (ErrorCode, ErrorMessage)."""

    SequenceNumber: str | None = None
    ShardId: str | None = None
    ErrorCode: str | None = None
    ErrorMessage: str | None = None


class _PutAnswer(msgspec.Struct):
    Records: list[PutResult]


_ANSWER = msgspec.json.Decoder(_PutAnswer)


def encode_body(stream_name: str, entries: Iterable[Entry]) -> bytes:
    """The JSON body of a PutRecords call of ``entries`` (msgspec writes ``bytes`` as base64, in C)."""
    return _BODY_ENCODER.encode({**stream_param(stream_name), "Records": [entry.to_request() for entry in entries]})


def call_params(stream_name: str, entries: Iterable[Entry]) -> dict[str, Any]:
    """The keyword arguments of ``client.put_records`` (a prepared client) that send ``entries`` as our body."""
    return {**stream_param(stream_name), "Records": _PLACEHOLDER, ENCODED_BODY: encode_body(stream_name, entries)}


def decode_answer(raw: bytes) -> list[PutResult]:
    """The per-entry results of an answer's undecoded body (``answer[RAW_ANSWER]``), in the call's order."""
    return _ANSWER.decode(raw).Records


def prepare_client(client: Any) -> Any:
    """Teach ``client`` (a botocore Kinesis client; idempotent) the encoded-body shortcut (see the module doc)."""
    events = client.meta.events
    events.register("before-parameter-build.kinesis.PutRecords", _take_encoded_body, unique_id="encoded-body-take")
    events.register("before-call.kinesis.PutRecords", _swap_in_encoded_body, unique_id="encoded-body-swap")
    events.register("before-parse.kinesis.PutRecords", _keep_raw_answer, unique_id="encoded-body-answer")
    return client


def _take_encoded_body(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    """botocore's ``before-parameter-build`` hook: move our body out of the parameters before botocore validates
    them (it would refuse an unknown parameter) into the call's context."""
    _call.ours = ENCODED_BODY in params  # set on every PutRecords of this client: never stale
    if _call.ours:
        context[ENCODED_BODY] = params.pop(ENCODED_BODY)


def _swap_in_encoded_body(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    """botocore's ``before-call`` hook: the serialized request's body (the placeholder's) becomes ours, before
    the request is built and signed."""
    if ENCODED_BODY in context:
        params["body"] = context.pop(ENCODED_BODY)


def _keep_raw_answer(response_dict: dict[str, Any], customized_response_dict: dict[str, Any], **_: Any) -> None:
    """botocore's ``before-parse`` hook: the successful answer of a call with our body skips botocore's parser (an
    error answer keeps its body, so botocore still raises ClientError with the AWS error code)."""
    if getattr(_call, "ours", False) and response_dict.get("status_code") == 200:
        customized_response_dict[RAW_ANSWER] = response_dict["body"]
        response_dict["body"] = b"{}"
