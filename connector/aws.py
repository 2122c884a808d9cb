"""The one place that builds AWS clients (botocore) and sees secrets: endpoint, region, credentials, timeouts.

Who calls it: the driver-side readers (ListShards), the executor-side fetchers (GetShardIterator, GetRecords),
the metadata stores and the sink. Settings are parsed once on the driver (``ClientSettings.from_options``) and
pickled into tasks; clients are made lazily, once per process and settings (``client()``), because a boto3
client cannot be pickled and is expensive to build. botocore's own retries are off: ``connector.retry`` owns
every retry, bounded by the ``kinesis.client*`` options. Each client builds its User-Agent header once per set
of features, not twice per call (``build_user_agent_once``).

Credentials, in this order of layers:
- base: the explicit keys of the options, else boto3's default chain (env, profile, web identity, container,
  instance profile), which boto3 refreshes itself;
- assumed role (``kinesis.stsRoleArn``): assumed from the base credentials with botocore's
  ``AssumeRoleCredentialFetcher`` + ``DeferredRefreshableCredentials`` (external ID, session name, duration),
  once per process and settings (``role_credentials``), shared by every client and task of that process and
  refreshed before it expires. Only Kinesis clients use the role; the metadata store's clients take
  ``settings.without_role()``.
Secrets (keys, session tokens, the external ID) never appear in a repr, a log line or an error: errors about
credentials name the role, the endpoint and what failed, and pass AWS's message through ``redact``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from . import options as opts
from .options import OptionError, ParsedOptions
from .retry import RetryPolicy

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
class AssumeRole:
    """The role Kinesis clients assume (``kinesis.sts*`` options). Picklable; the external ID stays out of reprs."""

    role_arn: str
    session_name: str
    external_id: str | None = field(default=None, repr=False)
    duration_s: int = 3600
    sts_endpoint_url: str | None = None

    def describe(self) -> str:
        """The role, session and STS endpoint for error messages (never the external ID)."""
        return f"role {self.role_arn} (session {self.session_name}, STS {self.sts_endpoint_url or 'AWS default'})"


@dataclass(frozen=True)
class ClientSettings:
    """Everything needed to build a client in any process. Picklable; secrets are left out of the repr.

    ``region`` serves STS and the metadata store, and Kinesis unless ``kinesis_region`` is set; ``role`` is
    assumed by Kinesis clients only.
    """

    region: str
    endpoint_url: str | None = None
    access_key_id: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_pool_connections: int = 10
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 60.0
    role: AssumeRole | None = None
    kinesis_region: str | None = None

    @classmethod
    def from_options(cls, options: ParsedOptions, max_pool_connections: int = 10) -> ClientSettings:
        """Build from parsed options; raises OptionError when no region can be found or keys come alone."""
        endpoint = options[opts.ENDPOINT_URL.key]
        kinesis_region = options[opts.KINESIS_REGION.key]
        # With kinesis.kinesisRegion set, the endpoint names the stream's region, not the application's.
        inferred = None if kinesis_region else infer_region(endpoint)
        region = options[opts.REGION.key] or inferred or sdk_default_region() or kinesis_region
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
            role=assume_role(options),
            kinesis_region=kinesis_region,
        )

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any], side: opts.Side = opts.Side.BOTH) -> ClientSettings:
        """Shortcut from Spark's raw options dict."""
        return cls.from_options(opts.parse_options(raw, side))

    def without_role(self) -> ClientSettings:
        """The application's own credentials, without any assumed stream-owner role: the metadata store's clients
        use these (the table lives with the job, the stream may live in another account)."""
        return dataclasses.replace(self, role=None)

    def region_of(self, service: str) -> str:
        """The region a ``service`` client is sent to and signed for."""
        return (self.kinesis_region or self.region) if service == "kinesis" else self.region

    def where(self) -> str:
        """Endpoint, region and role for error messages (never credentials)."""
        role = f" as {self.role.describe()}" if self.role else ""
        return f"endpoint {self.endpoint_url or 'AWS default'} in region {self.region_of('kinesis')}{role}"

    def secret_values(self) -> tuple[str, ...]:
        """Every secret value these settings hold, for ``redact``."""
        found = (self.access_key_id, self.secret_key, self.session_token, self.role and self.role.external_id)
        return tuple(value for value in found if value)


def assume_role(options: ParsedOptions) -> AssumeRole | None:
    """The ``kinesis.sts*`` options as an AssumeRole, or None without ``kinesis.stsRoleArn``."""
    role_arn = options[opts.STS_ROLE_ARN.key]
    if role_arn is None:
        return None
    return AssumeRole(
        role_arn=role_arn,
        session_name=options[opts.STS_SESSION_NAME.key] or default_session_name(options[opts.STREAM_NAME.key]),
        external_id=options[opts.STS_EXTERNAL_ID.key],
        duration_s=options[opts.STS_DURATION_SEC.key],
        sts_endpoint_url=options[opts.STS_ENDPOINT_URL.key],
    )


def default_session_name(streams: str | None) -> str:
    """``aws-kinesis-<first stream>-<8 hex>``: names the query's stream in CloudTrail, new for each query.

    Made once on the driver and pickled with the settings, so every process of one query uses the same name.
    """
    stream = re.sub(r"[^\w+=,.@-]", "-", (streams or "sink").split(",")[0].strip())[:40]
    return f"aws-kinesis-{stream}-{secrets.token_hex(4)}"


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
    import botocore.session

    return botocore.session.get_session().get_config_variable("region")


_sdk_default_region = sdk_default_region  # the generator's name for it


def credentials_provider(settings: ClientSettings) -> dict[str, str | None]:
    """Session keyword arguments for the base credentials: explicit keys, or none (boto3's default chain)."""
    if settings.access_key_id is None:
        return {}
    return {
        "aws_access_key_id": settings.access_key_id,
        "aws_secret_access_key": settings.secret_key,
        "aws_session_token": settings.session_token,
    }


# --- the assumed role: once per process and settings, refreshed before it expires ---------------------------

# Seconds before expiry at which an assumed role is refreshed (overrides the default of a third of the duration,
# at most 15 min). For tests that watch a refresh happen within seconds; not a user setting.
REFRESH_WINDOW_ENV = "AWS_KINESIS_STS_REFRESH_WINDOW_S"
ROLE_METHOD = "aws-kinesis-assume-role"


class AssumeRoleError(RuntimeError):
    """AssumeRole failed: names the role and what failed, never a secret."""


def redact(text: str, settings: ClientSettings) -> str:
    """``text`` with every secret value of ``settings`` replaced by ``<secret>``."""
    for value in settings.secret_values():
        text = text.replace(value, "<secret>")
    return text


def refresh_windows(duration_s: int) -> tuple[float, float]:
    """(advisory, mandatory) seconds before expiry: from the advisory one on, one thread refreshes while others
    keep the current keys; from the mandatory one on, every call waits for fresh keys.

    botocore's defaults (15 and 10 min) would refresh a 15-minute session on every call.
    """
    override = os.environ.get(REFRESH_WINDOW_ENV)
    advisory = float(override) if override else min(15 * 60.0, duration_s / 3)
    return advisory, min(10 * 60.0, advisory / 2)


_role_credentials: dict[tuple[Any, ...], Any] = {}
_role_lock = threading.Lock()


def role_credentials(settings: ClientSettings) -> Any:
    """The process's refreshable credentials of ``settings.role``, shared by every client of these settings.

    Deferred: the first signed request assumes the role, later ones reuse the keys until the advisory window.
    """
    assert settings.role is not None
    key = (settings.region, settings.role, *credentials_provider(settings).values())
    with _role_lock:
        if key not in _role_credentials:
            _role_credentials[key] = _new_role_credentials(settings)
        return _role_credentials[key]


def _new_role_credentials(settings: ClientSettings) -> Any:
    from botocore.credentials import AssumeRoleCredentialFetcher, DeferredRefreshableCredentials

    role = settings.role
    assert role is not None
    advisory, mandatory = refresh_windows(role.duration_s)
    extra: dict[str, Any] = {"RoleSessionName": role.session_name, "DurationSeconds": role.duration_s}
    if role.external_id is not None:
        extra["ExternalId"] = role.external_id
    fetcher = AssumeRoleCredentialFetcher(
        client_creator=lambda service, **keys: _sts_client(settings, **keys),
        source_credentials=_base_credentials(settings),
        role_arn=role.role_arn,
        extra_args=extra,
        expiry_window_seconds=advisory,  # the fetcher's cache must not hand back keys the refresh wants replaced
    )

    def fetch() -> dict[str, Any]:
        try:
            return fetcher.fetch_credentials()
        except Exception as exc:  # botocore and STS errors alike: explain them without any secret
            raise AssumeRoleError(explain_assume_role_failure(settings, exc)) from None

    credentials = DeferredRefreshableCredentials(refresh_using=fetch, method=ROLE_METHOD)
    # botocore reads its refresh windows from these attributes (class defaults 15 / 10 min).
    credentials._advisory_refresh_timeout = advisory
    credentials._mandatory_refresh_timeout = mandatory
    return credentials


def _base_credentials(settings: ClientSettings) -> Any:
    """The credentials the role is assumed from: the explicit keys, else boto3's default chain."""
    import botocore.session
    from botocore.credentials import Credentials

    if settings.access_key_id is not None:
        return Credentials(settings.access_key_id, settings.secret_key, settings.session_token)
    found = botocore.session.get_session().get_credentials()
    if found is None:
        assert settings.role is not None
        raise AssumeRoleError(
            f"cannot assume {settings.role.describe()}: no base credentials (set {opts.ACCESS_KEY_ID.name} and "
            f"{opts.SECRET_KEY.name}, or give the process credentials through the AWS SDK's default chain)"
        )
    return found


def _sts_client(settings: ClientSettings, **keys: Any) -> Any:
    """An STS client signed with the base ``keys``; botocore retries its throttling (nothing else wraps it)."""
    import botocore.session
    from botocore.config import Config

    assert settings.role is not None
    config = Config(
        connect_timeout=settings.connect_timeout_s,
        read_timeout=settings.read_timeout_s,
        retries={"total_max_attempts": settings.retry.max_retries + 1, "mode": "standard"},
    )
    return botocore.session.get_session().create_client(
        "sts", region_name=settings.region, endpoint_url=settings.role.sts_endpoint_url, config=config, **keys
    )


# What an AssumeRole error code means for the user, beyond AWS's own message.
_ASSUME_ROLE_HINTS = {
    "AccessDenied": (
        "the base credentials may not call sts:AssumeRole on it, or its trust policy refuses them or the "
        f"external ID ({opts.STS_EXTERNAL_ID.name}: a wrong or missing one also answers AccessDenied)"
    ),
    "ExpiredToken": "the base credentials' session token has expired",
    "ExpiredTokenException": "the base credentials' session token has expired",
    "InvalidClientTokenId": "the base credentials' access key id is not valid",
    "SignatureDoesNotMatch": "the base credentials' secret key does not match its access key id",
    "ValidationError": f"AWS refused a parameter ({opts.STS_DURATION_SEC.name} above the role's maximum session "
    f"duration, or {opts.STS_SESSION_NAME.name})",
    "RegionDisabledException": f"STS is not activated in region {{region}} ({opts.REGION.name})",
}


def explain_assume_role_failure(settings: ClientSettings, exc: BaseException) -> str:
    """One line naming the role, what failed and why it may have, with AWS's message redacted."""
    from .retry import error_code

    assert settings.role is not None
    code = error_code(exc)
    hint = _ASSUME_ROLE_HINTS.get(code, "").format(region=settings.region)
    detail = redact(str(exc), settings)
    return f"AssumeRole of {settings.role.describe()} failed: {code}" + (f" ({hint})" if hint else "") + f": {detail}"


def _role_session(settings: ClientSettings) -> Any:
    """A botocore session whose credentials are the process's shared assumed-role credentials."""
    import botocore.session
    from botocore.credentials import CredentialProvider

    shared = role_credentials(settings)

    class SharedRole(CredentialProvider):
        METHOD = ROLE_METHOD

        def load(self) -> Any:
            return shared

    botocore_session = botocore.session.get_session()
    botocore_session.get_component("credential_provider").insert_before("env", SharedRole())
    return botocore_session


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
            build_user_agent_once(made)
            if raw_get_records:
                made.meta.events.register(f"before-parse.{service}.GetRecords", _keep_raw_body)
            _clients[key] = made
        return _clients[key]


def _keep_raw_body(response_dict: dict[str, Any], customized_response_dict: dict[str, Any], **_: Any) -> None:
    """botocore's ``before-parse`` hook: a successful GetRecords answer skips botocore's parser.

    The body moves to ``RAW_BODY`` for ``connector.fetch.decode`` and botocore parses an empty object instead. Errors
    keep their body, so botocore still raises ClientError with the AWS error code.
    """
    if response_dict.get("status_code") == 200:
        customized_response_dict[RAW_BODY] = response_dict["body"]
        response_dict["body"] = b"{}"


_USER_AGENTS_KEPT = 64  # distinct feature sets per client; a probe or a read uses one or two


def build_user_agent_once(made: Any) -> None:
    """Make ``made`` build its User-Agent header once per set of features instead of twice per call.

    botocore rebuilds the header from its parts (SDK, OS, Python, config, features) for every request, once
    when it serializes the call and again just before sending it (``rebuild_and_replace_user_agent_handler``):
    ~10 % of the CPU of a driver's GetRecords probe, which at 1,000+ idle shards adds up (``bench/user_agent.py``).
    Every part but the features (the ``m/`` component, e.g. the retry mode or how credentials were found) is
    fixed for a client's life, so the string is kept per feature set: the header stays what botocore would send.
    Signing is untouched (SigV4 does not sign User-Agent). A botocore without these internals keeps its own way.
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
    # botocore, not boto3: a boto3 client is this same botocore client, and importing boto3 (with s3transfer)
    # costs every fresh Python worker ~20 ms of CPU before its first read, several times that on a cold disk or
    # a loaded host (bench/source_throughput.py prints the first batch's parts).
    import botocore.session
    from botocore.config import Config

    keys: dict[str, str | None] = {}
    if service == "kinesis" and settings.role is not None:
        session = _role_session(settings)
    else:
        session, keys = botocore.session.get_session(), credentials_provider(settings)
    config = Config(
        connect_timeout=settings.connect_timeout_s,
        read_timeout=settings.read_timeout_s,
        max_pool_connections=settings.max_pool_connections,
        # total_max_attempts counts the first try: botocore never retries, connector.retry does.
        retries={"total_max_attempts": 1, "mode": "standard"},
    )
    return session.create_client(
        service, region_name=settings.region_of(service), endpoint_url=settings.endpoint_url, config=config, **keys
    )


def kinesis_client(settings: ClientSettings) -> Any:
    """The process's Kinesis client for ``settings``."""
    return client("kinesis", settings)


def kinesis_reader_client(settings: ClientSettings) -> Any:
    """The process's Kinesis client for reading records: its ``get_records`` answers ``{RAW_BODY: bytes}``
    (decoded by ``connector.fetch.decode``, ~4x faster than botocore's parser); every other call is as usual."""
    return client("kinesis", settings, raw_get_records=True)
