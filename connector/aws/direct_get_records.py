"""GetRecords without botocore's per-call machinery: the reader client's ``get_records``, signed and sent directly.

Who calls it: ``clients.client`` installs it on each reader client (``kinesis_reader_client``); the driver's probes
and the executors' reads call it as ``client.get_records(ShardIterator=..., Limit=..., StreamARN=...)``. botocore
spends ~0.8 ms of CPU on each GetRecords (endpoint rules, event hooks, signing), which at 10,000 shards is most of
a trigger (docs/source.md, "GetRecords signed directly"). Here the endpoint and signing scope are resolved by
botocore once per stream, the request is signed with SigV4 as botocore signs it, and sent through the client's own
HTTP session (its pool, timeouts, proxies and TLS settings). An error answer is parsed and raised by botocore's
own parser and exception classes, so retries and messages see what they saw before.

botocore's ``before-call`` and ``before-send`` events are still emitted (a hook that answers, as tests and the
benchmarks' stand-in do, still answers); ``before-parse`` and ``after-call`` are not. A botocore without the
internals used here keeps its own ``get_records``.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

_OPERATION = "GetRecords"
_TARGET = b"Kinesis_20131202.GetRecords"
_CONTENT_TYPE = b"application/x-amz-json-1.1"
_PARAMETERS = frozenset({"ShardIterator", "Limit", "StreamARN"})


@dataclass(frozen=True)
class _Target:
    """Where one stream's GetRecords go and the scope they are signed for (botocore's endpoint rules, once)."""

    url: str
    path: str  # the canonical URI SigV4 signs
    host: str
    region: str
    service: str
    headers: tuple[tuple[str, bytes], ...]  # sent with every call: the endpoint rules' and the fixed ones


def install_direct_get_records(client: Any, raw_body_key: str) -> None:
    """Make ``client.get_records`` a ``DirectGetRecords`` (an instance attribute shadows the method) whose answers
    carry the undecoded body under ``raw_body_key``."""
    try:
        direct = DirectGetRecords(client, raw_body_key)
    except AttributeError:  # a botocore without these internals: its own way
        return
    client.get_records = direct


class DirectGetRecords:
    """``get_records(**params)`` for one botocore Kinesis client; answers ``{raw_body_key: bytes, ...}`` (the
    client's ``clients.RAW_BODY``) on success and raises the client's ClientError otherwise."""

    def __init__(self, client: Any, raw_body_key: str):
        self._client = client
        self._raw_body = raw_body_key
        self._model = client._service_model.operation_model(_OPERATION)
        self._session = client._endpoint.http_session
        self._signer = client._request_signer
        self._credentials = self._signer._credentials  # refreshable ones refresh themselves
        self._parser = client._response_parser
        self._user_agent = client._user_agent_creator
        self._resolve = client._resolve_endpoint_ruleset
        self._botocore_call = client.get_records  # the bound method, for calls this path does not cover
        self._events = client.meta.events
        self._targets: dict[str | None, _Target] = {}
        self._keys = _SigningKeys()

    def __call__(self, **params: Any) -> dict[str, Any]:
        if not _PARAMETERS.issuperset(params) or not isinstance(params.get("Limit", 1), int):
            return self._botocore_call(**params)  # botocore validates what this path does not expect
        target = self._target(params.get("StreamARN"))
        body = json.dumps(params).encode()
        request = self._signed(target, body)
        _, answered = self._events.emit_until_response(
            f"before-call.kinesis.{_OPERATION}",
            model=self._model,
            params={"url": target.url, "headers": request.headers, "body": body, "method": "POST"},
            request_signer=self._signer,
            context={},
        )
        if answered is not None:
            http, parsed = answered
            return self._result(http, parsed)
        _, http = self._events.emit_until_response(f"before-send.kinesis.{_OPERATION}", request=request)
        if http is None:
            http = self._session.send(request)
        if http.status_code == 200:
            return {
                self._raw_body: http.content,
                "ResponseMetadata": {"HTTPStatusCode": 200, "HTTPHeaders": dict(http.headers)},
            }
        return self._result(http, None)

    def _result(self, http: Any, parsed: dict[str, Any] | None) -> dict[str, Any]:
        """An answer other than a plain 200: parsed by botocore, raised as its ClientError when an error."""
        if parsed is None:
            from botocore.endpoint import convert_to_response_dict

            response = convert_to_response_dict(http, self._model)
            parsed = self._parser.parse(response, self._model.output_shape)
        if http.status_code >= 300:
            code = parsed.get("Error", {}).get("Code")
            raise self._client.exceptions.from_code(code)(parsed, _OPERATION)
        return parsed

    def _target(self, stream_arn: str | None) -> _Target:
        found = self._targets.get(stream_arn)
        if found is None:
            found = self._targets[stream_arn] = self._resolve_target(stream_arn)
        return found

    def _resolve_target(self, stream_arn: str | None) -> _Target:
        params = {"ShardIterator": "-"} | ({"StreamARN": stream_arn} if stream_arn else {})
        context: dict[str, Any] = {"client_region": self._client.meta.region_name}
        with _call_context():  # the User-Agent names the features resolving registers, as botocore's call does
            url, extra, _properties = self._resolve(self._model, params, context)
            user_agent = self._user_agent.to_string()
        from botocore.auth import _host_from_url

        signing = context.get("signing", {})
        url = url.rstrip("/") + "/"
        headers = [(name, _bytes(value)) for name, value in extra.items()]
        headers += [("X-Amz-Target", _TARGET), ("Content-Type", _CONTENT_TYPE), ("User-Agent", _bytes(user_agent))]
        return _Target(
            url=url,
            path=urlsplit(url).path or "/",
            host=_host_from_url(url),  # lowercase, without a default port: the Host botocore signs
            region=signing.get("region") or self._client.meta.region_name,
            service=signing.get("signing_name") or self._client.meta.service_model.signing_name,
            headers=tuple(headers),
        )

    def _signed(self, target: _Target, body: bytes) -> Any:
        from botocore.awsrequest import AWSPreparedRequest
        from botocore.exceptions import NoCredentialsError

        if self._credentials is None:
            raise NoCredentialsError()
        frozen = self._credentials.get_frozen_credentials()
        headers: dict[str, bytes] = dict(target.headers)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        headers["X-Amz-Date"] = stamp.encode()
        if frozen.token:
            headers["X-Amz-Security-Token"] = frozen.token.encode()
        headers["Authorization"] = sigv4_authorization(
            headers, target, body, stamp, frozen.access_key, self._keys.key(frozen.secret_key, stamp[:8], target)
        ).encode()
        headers["Content-Length"] = str(len(body)).encode()
        return AWSPreparedRequest("POST", target.url, headers, body, stream_output=False)


def sigv4_authorization(
    headers: dict[str, bytes], target: _Target, body: bytes, stamp: str, access_key: str, key: bytes
) -> str:
    """The SigV4 ``Authorization`` header of a POST to ``target.url`` with ``headers`` (before Content-Length and
    Authorization are added; User-Agent is not signed, as botocore does not sign it)."""
    signed = {name.lower(): " ".join(value.decode().split()) for name, value in headers.items()}
    signed.pop("user-agent", None)
    signed["host"] = target.host
    names = sorted(signed)
    canonical = "\n".join(
        (
            "POST",
            target.path,
            "",
            "".join(f"{name}:{signed[name]}\n" for name in names),
            ";".join(names),
            hashlib.sha256(body).hexdigest(),
        )
    )
    scope = f"{stamp[:8]}/{target.region}/{target.service}/aws4_request"
    to_sign = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, SignedHeaders={';'.join(names)}, Signature={signature}"


class _SigningKeys:
    """SigV4's derived key, kept for the day, region and service it was made for (four HMACs each)."""

    def __init__(self) -> None:
        self._kept: tuple[tuple[str, str, str, str], bytes] | None = None  # one tuple, replaced whole

    def key(self, secret: str, day: str, target: _Target) -> bytes:
        wanted = (secret, day, target.region, target.service)
        kept = self._kept
        if kept is not None and kept[0] == wanted:
            return kept[1]
        key = ("AWS4" + secret).encode()
        for part in (day, target.region, target.service, "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        self._kept = (wanted, key)
        return key


def _bytes(value: str | bytes) -> bytes:
    return value.encode() if isinstance(value, str) else value


def _call_context() -> Any:
    """botocore's per-call context (the features a User-Agent names); none on a botocore without one (1.35)."""
    try:
        from botocore.context import start_as_current_context
    except ImportError:
        return contextlib.nullcontext()
    return start_as_current_context()
