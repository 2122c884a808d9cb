"""The one place that builds boto3 clients: endpoint, region, credentials, timeouts.

Who calls it: the driver-side readers (ListShards), the executor-side fetchers (GetShardIterator, GetRecords),
the S3 metadata store and the sink. Settings are parsed once on the driver (``ClientSettings.from_options``) and
pickled into tasks; clients are made lazily, once per process and settings (``client()``), because a boto3
client cannot be pickled and is expensive to build. botocore's own retries are off: ``connector.retry`` owns
every retry, bounded by the ``kinesis.client*`` options.

Credentials: explicit keys from the options, else boto3's default chain. ``credentials_provider`` is the seam
where an STS AssumeRole (role ARN + external ID) plugs in later. Secrets never appear in reprs or errors.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from connector import options as opts
from connector.options import OptionError, ParsedOptions
from connector.retry import RetryPolicy

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
LOOPBACK_REGION = "us-east-1"
# kinesis.us-west-2.amazonaws.com, kinesis-fips.us-gov-west-1.amazonaws.com, kinesis.cn-north-1.amazonaws.com.cn
_REGION_IN_HOST = re.compile(r"(?:^|\.)([a-z]{2}(?:-[a-z]+)+-\d+)\.amazonaws\.com(?:\.cn)?$")


def infer_region(endpoint_url: str | None) -> str | None:
    """The region named by an AWS endpoint's host, ``us-east-1`` for a loopback endpoint, else None."""
    if not endpoint_url:
        return None
    host = (urlparse(endpoint_url if "://" in endpoint_url else f"https://{endpoint_url}").hostname or "").lower()
    if host in LOOPBACK_HOSTS or host.startswith("127."):
        return LOOPBACK_REGION
    match = _REGION_IN_HOST.search(host)
    return match.group(1) if match else None


@dataclass(frozen=True)
class ClientSettings:
    """Everything needed to build a client in any process. Picklable; secrets are left out of the repr."""

    region: str
    endpoint_url: str | None = None
    access_key_id: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_pool_connections: int = 10
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 60.0

    @classmethod
    def from_options(cls, options: ParsedOptions, max_pool_connections: int = 10) -> ClientSettings:
        """Build from parsed options; raises OptionError when no region can be found or keys come alone."""
        endpoint = options[opts.ENDPOINT_URL.key]
        region = options[opts.REGION.key] or infer_region(endpoint) or sdk_default_region()
        if not region:
            raise OptionError(
                f"option {opts.REGION.name} is not set and cannot be inferred from {opts.ENDPOINT_URL.name}="
                f"{endpoint!r} or the AWS SDK configuration: set it, e.g. us-east-1"
            )
        key_id, secret = options[opts.ACCESS_KEY_ID.key], options[opts.SECRET_KEY.key]
        if (key_id is None) != (secret is None):
            raise OptionError(
                f"options {opts.ACCESS_KEY_ID.name} and {opts.SECRET_KEY.name} must be given together (only one is set)"
            )
        return cls(
            region=region,
            endpoint_url=endpoint,
            access_key_id=key_id,
            secret_key=secret,
            session_token=options[opts.SESSION_TOKEN.key],
            retry=retry_policy(options),
            max_pool_connections=max_pool_connections,
        )

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any], side: opts.Side = opts.Side.BOTH) -> ClientSettings:
        """Shortcut from Spark's raw options dict."""
        return cls.from_options(opts.parse_options(raw, side))

    def without_role(self) -> ClientSettings:
        """The application's own credentials, without any assumed stream-owner role: the metadata store's clients
        use these (the table lives with the job, the stream may live in another account)."""
        return self

    def where(self) -> str:
        """Endpoint and region for error messages (never credentials)."""
        return f"endpoint {self.endpoint_url or 'AWS default'} in region {self.region}"


def retry_policy(options: ParsedOptions) -> RetryPolicy:
    """The RetryPolicy of the ``kinesis.client*`` options; raises OptionError when the intervals disagree."""
    initial = options[opts.CLIENT_RETRY_INTERVALS_MS.key]
    maximum = options[opts.CLIENT_MAX_RETRY_INTERVAL_MS.key]
    if initial > maximum:
        raise OptionError(
            f"option {opts.CLIENT_RETRY_INTERVALS_MS.name}={initial} must not exceed "
            f"{opts.CLIENT_MAX_RETRY_INTERVAL_MS.name}={maximum}"
        )
    return RetryPolicy(options[opts.CLIENT_NUM_RETRIES.key], initial, maximum)


def sdk_default_region() -> str | None:
    """The AWS SDK's default region (AWS_REGION, AWS_DEFAULT_REGION, the config file), or None."""
    import boto3

    return boto3.session.Session().region_name


_sdk_default_region = sdk_default_region  # the generator's name for it


def credentials_provider(settings: ClientSettings) -> dict[str, str | None]:
    """Session keyword arguments for the credentials: explicit keys, or none (boto3's default chain).

    The STS AssumeRole (role ARN + external ID) variant will return the assumed role's keys here.
    """
    if settings.access_key_id is None:
        return {}
    return {
        "aws_access_key_id": settings.access_key_id,
        "aws_secret_access_key": settings.secret_key,
        "aws_session_token": settings.session_token,
    }


_clients: dict[tuple[str, ClientSettings, bool], Any] = {}
_lock = threading.Lock()
RAW_BODY = "RawBody"  # where a reader client's GetRecords answer carries its undecoded body


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
            if raw_get_records:
                made.meta.events.register(f"before-parse.{service}.GetRecords", _keep_raw_body)
            _clients[key] = made
        return _clients[key]


def _keep_raw_body(response_dict: dict[str, Any], customized_response_dict: dict[str, Any], **_: Any) -> None:
    """botocore's ``before-parse`` hook: a successful GetRecords answer skips botocore's parser.

    The body moves to ``RAW_BODY`` for ``connector.decode`` and botocore parses an empty object instead. Errors
    keep their body, so botocore still raises ClientError with the AWS error code.
    """
    if response_dict.get("status_code") == 200:
        customized_response_dict[RAW_BODY] = response_dict["body"]
        response_dict["body"] = b"{}"


def _new_client(service: str, settings: ClientSettings) -> Any:
    import boto3
    from botocore.config import Config

    session = boto3.session.Session(region_name=settings.region, **credentials_provider(settings))
    config = Config(
        connect_timeout=settings.connect_timeout_s,
        read_timeout=settings.read_timeout_s,
        max_pool_connections=settings.max_pool_connections,
        # total_max_attempts counts the first try: botocore never retries, connector.retry does.
        retries={"total_max_attempts": 1, "mode": "standard"},
    )
    return session.client(service, endpoint_url=settings.endpoint_url, config=config)


def kinesis_client(settings: ClientSettings) -> Any:
    """The process's Kinesis client for ``settings``."""
    return client("kinesis", settings)


def kinesis_reader_client(settings: ClientSettings) -> Any:
    """The process's Kinesis client for reading records: its ``get_records`` answers ``{RAW_BODY: bytes}``
    (decoded by ``connector.decode``, ~4x faster than botocore's parser); every other call is as usual."""
    return client("kinesis", settings, raw_get_records=True)
