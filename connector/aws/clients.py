"""AWS clients: one per process, service and settings, made on first use (a client cannot be pickled).

Who calls it: every module that calls AWS, through ``kinesis_client``, ``kinesis_reader_client`` (GetRecords
answers handed over undecoded, for ``fetch.decode``) or ``client`` (S3, DynamoDB, CloudWatch). botocore's own
retries are off (``pyspark_aws_kinesis.retry`` owns them); each client builds its User-Agent header once per set of
features, not twice per call (``build_user_agent_once``).
"""

from __future__ import annotations

import calendar
import datetime
import json
import threading
from typing import Any

from .credentials import credentials_provider, role_session
from .direct_get_records import install_direct_get_records
from .settings import ClientSettings

_clients: dict[tuple[str, ClientSettings, bool], Any] = {}
_lock = threading.Lock()
_session: Any = None  # the process's botocore session: its loader keeps the service models a client reads
RAW_BODY = "RawBody"  # where a reader client's GetRecords answer carries its undecoded body
# Where a DescribeStreamSummary answer carries MaxRecordSizeInKiB, which an older botocore (EMR's 1.35) drops.
MAX_RECORD_SIZE_KIB = "MaxRecordSizeInKiB"


def client(service: str, settings: ClientSettings, raw_get_records: bool = False) -> Any:
    """A boto3 client for ``service``, made once per process and settings (boto3 clients are thread-safe).

    ``settings.endpoint_url`` is used as given: for another service than Kinesis, pass settings whose endpoint is
    that service's (``dataclasses.replace(settings, endpoint_url=...)``) or None for AWS's.
    ``raw_get_records``: see ``kinesis_reader_client``.
    """
    key = (service, settings, raw_get_records)
    found = _clients.get(key)
    if found is not None:
        return found
    with _lock:  # boto3 sessions are not thread-safe to create
        if key not in _clients:
            made = _new_client(service, settings)
            build_user_agent_once(made)
            if service == "kinesis":
                send_timestamps_to_the_millisecond(made)
                made.meta.events.register("before-parse.kinesis.DescribeStreamSummary", _keep_max_record_size)
            if raw_get_records:
                read_answers_at_once(made)
                made.meta.events.register(f"before-parse.{service}.GetRecords", _keep_raw_body)
                install_direct_get_records(made, RAW_BODY)
            _clients[key] = made
        return _clients[key]


def read_answers_at_once(made: Any) -> None:
    """Make ``made`` read each answer's body in one read, where botocore reads it in 64 KiB pieces and joins them:
    the join holds the body twice (27 MiB for one 10 MiB record, whose answer is 13 MiB of base64) and the pieces
    cost a third of a 10 MB answer's CPU on this side (docs/source.md, "The body read at once"). Only this
    client's HTTP session changes, and only once it sends: a ``before-send`` hook that answers (a test's, a
    benchmark's stand-in) still comes first. A botocore without these internals keeps its own way."""
    session = getattr(getattr(made, "_endpoint", None), "http_session", None)
    send = getattr(session, "send", None)
    if send is None:
        return

    def send_then_read(request: Any) -> Any:
        if getattr(request, "stream_output", True):  # a streamed answer (SubscribeToShard): botocore's way
            return send(request)
        request.stream_output = True  # else botocore's send reads the body, in pieces
        try:
            response = send(request)
        finally:
            request.stream_output = False
        response._content = _read_whole(response.raw, request)
        return response

    session.send = send_then_read


def _read_whole(raw: Any, request: Any) -> bytes:
    """``raw.read()``: the whole body in one buffer; urllib3's errors raised as botocore's send raises them, so
    retries and messages see what they would see without ``read_answers_at_once``."""
    from botocore.exceptions import ConnectionClosedError, HTTPClientError, ReadTimeoutError
    from urllib3.exceptions import ProtocolError
    from urllib3.exceptions import ReadTimeoutError as Urllib3ReadTimeoutError

    try:
        return raw.read() or b""
    except Urllib3ReadTimeoutError as exc:
        raise ReadTimeoutError(endpoint_url=request.url, error=exc) from exc
    except ProtocolError as exc:
        raise ConnectionClosedError(error=exc, request=request, endpoint_url=request.url) from exc
    except Exception as exc:
        raise HTTPClientError(error=exc) from exc


def _keep_raw_body(response_dict: dict[str, Any], customized_response_dict: dict[str, Any], **_: Any) -> None:
    """botocore's ``before-parse`` hook: a successful GetRecords answer skips botocore's parser.

    The body moves to ``RAW_BODY`` for ``pyspark_aws_kinesis.fetch.decode`` and botocore parses an empty object instead.
    Errors keep their body, so botocore still raises ClientError with the AWS error code.
    """
    if response_dict.get("status_code") == 200:
        customized_response_dict[RAW_BODY] = response_dict["body"]
        response_dict["body"] = b"{}"


def _keep_max_record_size(response_dict: dict[str, Any], customized_response_dict: dict[str, Any], **_: Any) -> None:
    """botocore's ``before-parse`` hook: a stream's maximum record size, from the answer's body, as
    ``MAX_RECORD_SIZE_KIB`` at the answer's top (an older botocore's model lacks the field and drops it)."""
    if response_dict.get("status_code") != 200:
        return
    summary = json.loads(response_dict["body"] or b"{}").get("StreamDescriptionSummary", {})
    customized_response_dict[MAX_RECORD_SIZE_KIB] = summary.get(MAX_RECORD_SIZE_KIB)


def send_timestamps_to_the_millisecond(made: Any) -> None:
    """Send ``Timestamp`` (GetShardIterator's and SubscribeToShard's AT_TIMESTAMP) in epoch seconds with its
    milliseconds, where older botocore sends whole seconds (docs/source.md, "Starting positions"). Only this
    client's serializer changes; a botocore without these internals keeps its own converter."""
    serializer = getattr(made, "_serializer", None)
    serializer = getattr(serializer, "_serializer", serializer)  # the protocol's, behind parameter validation
    if callable(getattr(serializer, "_timestamp_unixtimestamp", None)):
        serializer._timestamp_unixtimestamp = _epoch_seconds_to_the_millisecond


def _epoch_seconds_to_the_millisecond(value: datetime.datetime) -> float:
    return calendar.timegm(value.timetuple()) + (value.microsecond // 1000) / 1000


_USER_AGENTS_KEPT = 64  # distinct feature sets per client; a probe or a read uses one or two


def build_user_agent_once(made: Any) -> None:
    """Make ``made`` build its User-Agent header once per set of features instead of twice per call (its cost:
    docs/source.md, "Fast decoding"). Every part but the features (the ``m/`` component) is fixed for a client's
    life, so the header stays what botocore would send; SigV4 does not sign it. A botocore without these internals
    keeps its own way.
    """
    creator = getattr(made, "_user_agent_creator", None)
    build = getattr(creator, "to_string", None)
    if build is None:
        return
    try:
        from botocore.context import get_context
    except ImportError:  # a botocore before request contexts: nothing to key on, leave it alone
        return
    kept: dict[frozenset[str], str] = {}

    def to_string() -> str:
        context = get_context()
        features = frozenset(getattr(creator, "_client_features", None) or ())
        if context is not None:
            features |= context.features
        found = kept.get(features)
        if found is None:
            if len(kept) >= _USER_AGENTS_KEPT:
                kept.clear()
            found = kept[features] = build()
        return found

    # An instance attribute shadows the method for both callers: the client's serializer and the
    # request-created handler (a bound method of this same object, which calls ``self.to_string()``).
    creator.to_string = to_string


def _new_client(service: str, settings: ClientSettings) -> Any:
    from botocore.config import Config

    keys: dict[str, str | None] = {}
    if service == "kinesis" and settings.role is not None:
        session = role_session(settings)
    else:
        session, keys = _shared_session(), credentials_provider(settings)
    config = Config(
        connect_timeout=settings.connect_timeout_s,
        read_timeout=settings.read_timeout_s,
        max_pool_connections=settings.max_pool_connections,
        # total_max_attempts counts the first try: botocore never retries, pyspark_aws_kinesis.retry does.
        retries={"total_max_attempts": 1, "mode": "standard"},
    )
    return session.create_client(
        service, region_name=settings.region_of(service), endpoint_url=settings.endpoint_url, config=config, **keys
    )


def _shared_session() -> Any:
    """One botocore session per process (called under ``_lock``): a second client of a session costs ~0.01 CPU s,
    of a new session ~0.08 (the service's model read again), and a query start makes two or three."""
    global _session
    if _session is None:
        # botocore, not boto3 (the same client): boto3's import would cost every fresh Python worker before its
        # first read (docs/source.md, "A light start per Python worker").
        import botocore.session

        _session = botocore.session.get_session()
    return _session


def kinesis_client(settings: ClientSettings) -> Any:
    """The process's Kinesis client for ``settings``."""
    return client("kinesis", settings)


def kinesis_reader_client(settings: ClientSettings) -> Any:
    """The process's Kinesis client for reading records: its ``get_records`` answers ``{RAW_BODY: bytes}``, for
    ``fetch.decode`` (docs/source.md, "Fast decoding"); every other call is as usual."""
    return client("kinesis", settings, raw_get_records=True)
