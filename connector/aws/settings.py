"""Everything needed to build an AWS client in any process: ``ClientSettings``, parsed once from the options.

Who calls it: ``source.settings`` and ``sink.settings`` (``ClientSettings.from_options``, on the driver; the
settings are pickled into tasks), the consumers' command line, the metrics listener and the load generator
(``ClientSettings(...)`` directly). ``credentials`` and ``clients`` build from these settings.
"""

from __future__ import annotations

import dataclasses
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from .. import options as opts
from ..options import Option, OptionError, ParsedOptions
from ..options.kinds import is_loopback as is_loopback_host
from ..retry import RetryPolicy
from ..stream_ids import arn_region, first_stream, stream_name

LOOPBACK_REGION = "us-east-1"
# kinesis.us-west-2.amazonaws.com, kinesis-fips.us-gov-west-1.amazonaws.com, kinesis.cn-north-1.amazonaws.com.cn
_REGION_IN_HOST = re.compile(r"(?:^|\.)([a-z]{2}(?:-[a-z]+)+-\d+)\.amazonaws\.com(?:\.cn)?$")


def infer_region(endpoint_url: str | None) -> str | None:
    """The region named by an AWS endpoint's host, ``us-east-1`` for a loopback endpoint, else None."""
    if not endpoint_url:
        return None
    host = _host(endpoint_url)
    if is_loopback_host(host):
        return LOOPBACK_REGION
    match = _REGION_IN_HOST.search(host)
    return match.group(1) if match else None


def _host(endpoint_url: str) -> str:
    """The lower-case host of an endpoint URL, which may come without a scheme (``kinesis.eu-west-1...``)."""
    return (urlparse(endpoint_url if "://" in endpoint_url else f"https://{endpoint_url}").hostname or "").lower()


def shown_endpoint(endpoint_url: str | None) -> str:
    """``endpoint_url`` for messages and reprs, without any user info (options refuse it; other callers may not)."""
    if not endpoint_url:
        return "AWS default"
    scheme, separator, rest = endpoint_url.partition("://")
    host, slash, path = rest.partition("/")
    return (
        f"{scheme}{separator}{host.rpartition('@')[2]}{slash}{path}" if separator else endpoint_url.rpartition("@")[2]
    )


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
        return f"role {self.role_arn} (session {self.session_name}, STS {shown_endpoint(self.sts_endpoint_url)})"


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
        from_arn = stream_arn_region(options, kinesis_region)
        region = options[opts.REGION.key] or from_arn or inferred or sdk_default_region() or kinesis_region
        if not region:
            raise OptionError(
                f"option {opts.REGION.name} is not set and cannot be inferred from {opts.ENDPOINT_URL.name}="
                f"{endpoint!r} or the AWS SDK configuration: set it, e.g. us-east-1"
            )
        check_regions(options, region, kinesis_region)
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
        return f"endpoint {shown_endpoint(self.endpoint_url)} in region {self.region_of('kinesis')}{role}"

    def secret_values(self) -> tuple[str, ...]:
        """Every secret value these settings hold, for ``redact``."""
        found = (self.access_key_id, self.secret_key, self.session_token, self.role and self.role.external_id)
        return tuple(value for value in found if value)


def is_loopback(endpoint_url: str | None) -> bool:
    """Whether ``endpoint_url`` is a server on this machine (a local Kinesis: any region is fine there)."""
    return bool(endpoint_url) and is_loopback_host(_host(endpoint_url))


def stream_arn_region(options: ParsedOptions, kinesis_region: str | None) -> str | None:
    """The region of the ``kinesis.streamARN`` streams; raises OptionError when ``kinesis.region`` (or
    ``kinesis.kinesisRegion``, the stream's region) says another."""
    from_arn = arn_region(options)
    given = (opts.KINESIS_REGION, kinesis_region) if kinesis_region else (opts.REGION, options[opts.REGION.key])
    if from_arn and given[1] and given[1] != from_arn:
        raise OptionError(
            f"option {given[0].name}={given[1]!r} disagrees with {opts.STREAM_ARN.name}, whose streams are in "
            f"{from_arn!r}: leave {given[0].name} out (the ARN names the region) or set it to {from_arn!r}"
        )
    return from_arn


def check_regions(options: ParsedOptions, region: str, kinesis_region: str | None) -> None:
    """Refuse a region AWS does not have (botocore's partition data) at ``load()``, naming where it came from,
    unless ``kinesis.allowUnknownRegion`` is true or the endpoint is a loopback one. Called by ``from_options``."""
    if options[opts.ALLOW_UNKNOWN_REGION.key] or is_loopback(options[opts.ENDPOINT_URL.key]):
        return
    from .regions import unknown_region_problem

    hatch = f"for a region newer than this botocore set {opts.ALLOW_UNKNOWN_REGION.name}=true"
    for option, value in ((opts.KINESIS_REGION, kinesis_region), (opts.REGION, region)):
        problem = value and unknown_region_problem(value)
        if not problem:
            continue
        if options.is_set(option.key):
            raise OptionError(f"option {option.name}={value!r} is invalid: {problem} ({hatch})")
        raise OptionError(
            f"the region {value!r} (from {opts.ENDPOINT_URL.name} or the AWS SDK's AWS_REGION / config file) is "
            f"invalid: {problem}; set option {opts.REGION.name} ({hatch})"
        )


def _first_name(options: ParsedOptions) -> str | None:
    first = first_stream(options)
    return stream_name(first) if first else None


def assume_role(options: ParsedOptions) -> AssumeRole | None:
    """The ``kinesis.sts*`` options as an AssumeRole, or None without ``kinesis.stsRoleArn``."""
    role_arn = options[opts.STS_ROLE_ARN.key]
    if role_arn is None:
        return None
    return AssumeRole(
        role_arn=role_arn,
        session_name=options[opts.STS_SESSION_NAME.key] or default_session_name(_first_name(options)),
        external_id=options[opts.STS_EXTERNAL_ID.key],
        duration_s=options[opts.STS_DURATION_SEC.key],
        sts_endpoint_url=options[opts.STS_ENDPOINT_URL.key],
    )


# Drawn once per process: settings are the key of the process's clients and role credentials, so options parsed
# again (each foreachBatch write, a restarted query) must give equal settings.
_SESSION_TOKEN = secrets.token_hex(4)


def default_session_name(streams: str | None) -> str:
    """``aws-kinesis-<first stream>-<8 hex>``: names the query's stream in CloudTrail, the hex drawn once per driver
    process.

    Made on the driver and pickled with the settings, so every process of one query uses the same name.
    """
    stream = re.sub(r"[^\w+=,.@-]", "-", (streams or "sink").split(",")[0].strip())[:40]
    return f"aws-kinesis-{stream}-{_SESSION_TOKEN}"


def retry_policy(
    options: ParsedOptions,
    retries: Option = opts.CLIENT_NUM_RETRIES,
    first: Option = opts.CLIENT_RETRY_INTERVALS_MS,
    longest: Option = opts.CLIENT_MAX_RETRY_INTERVAL_MS,
) -> RetryPolicy:
    """The RetryPolicy of three options: how many retries, the first backoff and the longest one (by default the
    ``kinesis.client*`` options; the source passes the ``kinesis.metadata*Retr*`` ones). Raises OptionError when
    the first backoff exceeds the longest."""
    initial, maximum = options[first.key], options[longest.key]
    if initial > maximum:
        raise OptionError(f"option {first.name}={initial} must not exceed {longest.name}={maximum}")
    return RetryPolicy(options[retries.key], initial, maximum)


def sdk_default_region() -> str | None:
    """The AWS SDK's default region (AWS_REGION, AWS_DEFAULT_REGION, the config file), or None."""
    import botocore.session

    return botocore.session.get_session().get_config_variable("region")
