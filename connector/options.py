"""Every option of the ``aws-kinesis`` source and sink: name, type, default, unit, doc and validation, in one place.

Who uses it:
- ``connector.datasource`` parses the source options on the driver (``source_settings`` in ``stream_reader`` /
  ``batch_reader``) when the query is defined, so bad values fail before any batch runs.
- ``connector.sink`` parses its options with ``parse_options(raw, Side.SINK)``.
- ``connector.aws.settings.ClientSettings.from_options`` reads the endpoint, region and credential options.
- ``docs/options.md`` is ``render_markdown()``'s output (a test keeps it up to date).

Spark hands a data source its options with the keys lower-cased, so every lookup here is by lower-cased name;
the canonical camelCase spelling (the awslabs connector's) is kept for docs and error messages.
Adding an option is one ``_add(Option(...))`` call in the right block below.
"""

from __future__ import annotations

import difflib
import enum
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

PREFIX = "kinesis."


class OptionError(ValueError):
    """A bad option: the message names the option, the value given and what is allowed."""


class HiddenValueError(ValueError):
    """Raised by a check whose value may hold a secret: the error names the option but never echoes the value."""


class Side(enum.Flag):
    """Which side of the connector reads an option."""

    SOURCE = enum.auto()
    SINK = enum.auto()
    BOTH = SOURCE | SINK

    def label(self) -> str:
        return {Side.SOURCE: "source", Side.SINK: "sink"}.get(self, "both")


# --- value kinds: parse one raw string, or say what is allowed ------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """How a raw option string becomes a value; ``allowed`` says in words what is accepted."""

    type_name: str
    allowed: str
    parse: Callable[[str], Any]


def _bool(raw: str) -> bool:
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise ValueError
    return text == "true"


BOOL = Kind("boolean", "true or false", _bool)
STRING = Kind("string", "a non-empty string", lambda raw: raw if raw.strip() else _fail())


def _fail() -> Any:
    raise ValueError


def integer(minimum: int | None = None, maximum: int | None = None) -> Kind:
    """An integer within [minimum, maximum] (either bound may be open)."""

    def parse(raw: str) -> int:
        value = int(raw.strip())
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            raise ValueError
        return value

    if minimum is not None and maximum is not None:
        allowed = f"an integer from {minimum} to {maximum}"
    elif minimum is not None:
        allowed = f"an integer >= {minimum}"
    else:
        allowed = "an integer"
    return Kind("integer", allowed, parse)


def choice(*values: str) -> Kind:
    """One of ``values``, matched case-insensitively, returned in its canonical spelling."""
    by_lower = {value.lower(): value for value in values}

    def parse(raw: str) -> str:
        return by_lower[raw.strip().lower()]

    return Kind("enum", "one of " + ", ".join(values), parse)


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|secs|seconds?|m|min|minutes?|h|hours?)?\s*$", re.IGNORECASE)
_DURATION_UNITS_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _duration_s(raw: str) -> float:
    match = _DURATION.match(raw)
    if not match:
        raise ValueError
    unit = (match.group(2) or "s").lower()
    unit_key = "ms" if unit == "ms" else unit[0]
    return float(match.group(1)) * _DURATION_UNITS_S[unit_key]


DURATION = Kind("duration", "a duration such as 500ms, 1s, 2m (a bare number means seconds)", _duration_s)


def _pattern(name: str, allowed: str, pattern: str) -> Kind:
    """A string matching ``pattern`` in full."""
    compiled = re.compile(pattern)

    def parse(raw: str) -> str:
        if not compiled.fullmatch(raw.strip()):
            raise ValueError
        return raw.strip()

    return Kind(name, allowed, parse)


def _url(raw: str) -> str:
    """A URL or path with no user info: ``scheme://user:password@host`` would put a secret where logs see it."""
    value = STRING.parse(raw).strip()
    _, scheme_sep, rest = value.partition("://")
    if scheme_sep and "@" in rest.split("/", 1)[0]:
        raise HiddenValueError("it holds user info before the host; credentials go only in the credential options")
    return value


URL = Kind("URL", "a URL or path without user info (no `user:password@`)", _url)
ROLE_ARN = _pattern(
    "ARN",
    "an IAM role ARN, arn:<partition>:iam::<12-digit account>:role/<path/name>",
    r"arn:aws[a-z-]*:iam::\d{12}:role/(?:[\w+=,.@-]+/)*[\w+=,.@-]{1,64}",
)
SESSION_NAME = _pattern("string", "2-64 characters of A-Z a-z 0-9 _ + = , . @ -", r"[\w+=,.@-]{2,64}")
EXTERNAL_ID = _pattern("string", "2-1224 characters of A-Z a-z 0-9 _ + = , . @ : / -", r"[\w+=,.@:/-]{2,1224}")
REGION_NAME = _pattern("region", "an AWS region name such as eu-west-1", r"[a-z]{2}(?:-[a-z]+)+-\d+")


# --- the option record and the registry -----------------------------------------------------------------------


@dataclass(frozen=True)
class Option:
    """One option. ``default`` is the parsed value used when the option is absent (None: no value)."""

    name: str
    kind: Kind
    default: Any
    doc: str
    side: Side
    unit: str = ""
    secret: bool = False  # never echoed back in errors, reprs or logs
    # The default as shown in docs when it is not a plain value (for example "inferred from the endpoint").
    default_doc: str | None = None
    # Checks that need the parsed value, e.g. a JSON map's content; raise ValueError with a reason.
    check: Callable[[Any], None] | None = field(default=None, compare=False)
    # The lower-cased name of another option without which this one has no effect (checked by parse_options).
    requires: str | None = None

    @property
    def key(self) -> str:
        return self.name.lower()

    def parse(self, raw: Any) -> Any:
        """The parsed value of ``raw``; raises OptionError naming this option, the value and what is allowed."""
        try:
            value = self.kind.parse(str(raw))
            if self.check is not None:
                self.check(value)
            return value
        except (ValueError, KeyError, TypeError) as exc:
            shown = "<secret>" if self.secret or isinstance(exc, HiddenValueError) else repr(str(raw))
            reason = f" ({exc})" if str(exc) and not isinstance(exc, KeyError) else ""
            allowed = self.kind.allowed
            raise OptionError(f"option {self.name}={shown} is invalid{reason}: allowed is {allowed}") from None


REGISTRY: dict[str, Option] = {}


def _add(option: Option) -> Option:
    if not option.key.startswith(PREFIX):
        raise ValueError(f"option {option.name} must start with {PREFIX!r}")
    if option.key in REGISTRY:
        raise ValueError(f"option {option.name} is registered twice")
    REGISTRY[option.key] = option
    return option


def get(name: str) -> Option:
    """The registered option called ``name`` (any case)."""
    return REGISTRY[name.lower()]


# --- common options (source and sink) -------------------------------------------------------------------------

STREAM_NAME = _add(
    Option(
        "kinesis.streamName",
        STRING,
        None,
        "Stream to read (source: one or more, comma-separated; each row carries its `streamName`) or the default "
        "stream to write (sink; a `streamName` column overrides it per row).",
        Side.BOTH,
        default_doc="required for the source",
    )
)
ENDPOINT_URL = _add(
    Option(
        "kinesis.endpointUrl",
        URL,
        None,
        "Kinesis endpoint, e.g. `https://kinesis.us-west-2.amazonaws.com` or a local server's URL.",
        Side.BOTH,
        default_doc="the region's AWS endpoint",
    )
)
REGION = _add(
    Option(
        "kinesis.region",
        STRING,
        None,
        "AWS region of the stream. When absent it is inferred from the endpoint (`kinesis.<region>.amazonaws.com`), "
        "`us-east-1` for a loopback endpoint, else the AWS SDK's default region (AWS_REGION, config file).",
        Side.BOTH,
        default_doc="inferred",
    )
)
ACCESS_KEY_ID = _add(
    Option(
        "kinesis.awsAccessKeyId",
        STRING,
        None,
        "Access key id; with `kinesis.awsSecretKey`. Absent: the AWS SDK's default credential chain.",
        Side.BOTH,
        secret=True,
        default_doc="default chain",
    )
)
SECRET_KEY = _add(
    Option(
        "kinesis.awsSecretKey",
        STRING,
        None,
        "Secret access key; with `kinesis.awsAccessKeyId`.",
        Side.BOTH,
        secret=True,
        default_doc="default chain",
    )
)
SESSION_TOKEN = _add(
    Option(
        "kinesis.sessionToken",
        STRING,
        None,
        "Session token of temporary credentials; with the two key options.",
        Side.BOTH,
        secret=True,
        default_doc="none",
        requires="kinesis.awsaccesskeyid",
    )
)
STS_ROLE_ARN = _add(
    Option(
        "kinesis.stsRoleArn",
        ROLE_ARN,
        None,
        "Role to assume for Kinesis (e.g. the stream owner's cross-account role), from the credentials above (keys "
        "or the default chain). Assumed once per process and refreshed before it expires. The metadata store keeps "
        "the credentials above.",
        Side.BOTH,
        default_doc="none: no role",
    )
)
STS_SESSION_NAME = _add(
    Option(
        "kinesis.stsSessionName",
        SESSION_NAME,
        None,
        "Role session name (shown in CloudTrail); with `kinesis.stsRoleArn`.",
        Side.BOTH,
        default_doc="`aws-kinesis-<stream>-<8 hex>`, new for each query",
        requires="kinesis.stsrolearn",
    )
)
STS_EXTERNAL_ID = _add(
    Option(
        "kinesis.stsExternalId",
        EXTERNAL_ID,
        None,
        "External ID the role's trust policy demands (`sts:ExternalId`); with `kinesis.stsRoleArn`.",
        Side.BOTH,
        secret=True,
        requires="kinesis.stsrolearn",
    )
)
STS_DURATION_SEC = _add(
    Option(
        "kinesis.stsDurationSec",
        integer(900, 43200),
        3600,
        "Lifetime of the assumed role's credentials (at most the role's maximum session duration); they are "
        "refreshed when a third of it (at most 15 min) is left; with `kinesis.stsRoleArn`.",
        Side.BOTH,
        unit="s",
        requires="kinesis.stsrolearn",
    )
)
STS_ENDPOINT_URL = _add(
    Option(
        "kinesis.stsEndpointUrl",
        URL,
        None,
        "STS endpoint for the AssumeRole call (a VPC endpoint or a local server); with `kinesis.stsRoleArn`.",
        Side.BOTH,
        default_doc="the regional STS endpoint of `kinesis.region`",
        requires="kinesis.stsrolearn",
    )
)
KINESIS_REGION = _add(
    Option(
        "kinesis.kinesisRegion",
        REGION_NAME,
        None,
        "Region of the stream when it differs from `kinesis.region` (which then serves STS and the metadata "
        "store): Kinesis calls are sent to and signed for this region.",
        Side.BOTH,
        default_doc="`kinesis.region`",
    )
)
CLIENT_NUM_RETRIES = _add(
    Option(
        "kinesis.clientNumRetries",
        integer(0, 100),
        3,
        "Retries of a throttled, failed (5xx) or timed-out AWS call before the task fails.",
        Side.BOTH,
    )
)
CLIENT_RETRY_INTERVALS_MS = _add(
    Option(
        "kinesis.clientRetryIntervalsMs",
        integer(0),
        1000,
        "First retry's backoff; each further retry doubles it (with jitter), up to `kinesis.clientMaxRetryIntervalMs`.",
        Side.BOTH,
        unit="ms",
    )
)
CLIENT_MAX_RETRY_INTERVAL_MS = _add(
    Option(
        "kinesis.clientMaxRetryIntervalMs",
        integer(0),
        10000,
        "Longest backoff between two retries.",
        Side.BOTH,
        unit="ms",
    )
)


# --- source options -------------------------------------------------------------------------------------------


def _position_kind(name: str, allowed: str) -> Kind:
    def parse(raw: str) -> str:
        # Imported here: offsets is a lower-level module that must stay importable without the registry.
        from .positions import parse_starting_position

        parse_starting_position(raw)
        return raw.strip()

    return Kind(name, allowed, parse)


STARTING = _position_kind(
    "position",
    "LATEST, TRIM_HORIZON, EARLIEST, AT_TIMESTAMP:<ISO-8601 time with offset>, or a JSON map of per-shard positions",
)
ENDING = Kind("position", "LATEST or a JSON map of per-shard positions", STRING.parse)


CONSUMER_TYPE = _add(
    Option(
        "kinesis.consumerType",
        choice("GetRecords", "SubscribeToShard"),
        "GetRecords",
        "How shards are read: `GetRecords` (polling, shared throughput) or `SubscribeToShard` (enhanced fan-out: a "
        "registered consumer with its own 2 MiB/s per shard, pushed; needs `kinesis.consumerName`; streaming queries, "
        "batch reads use GetRecords).",
        Side.SOURCE,
    )
)

# --- enhanced fan-out (kinesis.consumerType=SubscribeToShard; see docs/source.md) ---
CONSUMER_NAME_CHARS = re.compile(r"^[a-zA-Z0-9_.\-]*$")
CONSUMER_NAME_MAX = 128


def _consumer_name_part(raw: str) -> str:
    value = raw.strip()
    if not CONSUMER_NAME_CHARS.match(value) or len(value) > CONSUMER_NAME_MAX:
        raise ValueError
    return value


CONSUMER_NAME_PART = Kind("string", f"at most {CONSUMER_NAME_MAX} letters, digits, _ . -", _consumer_name_part)
CONSUMER_NAME = _add(
    Option(
        "kinesis.consumerName",
        Kind("string", CONSUMER_NAME_PART.allowed + " (not empty)", lambda raw: _consumer_name_part(raw) or _fail()),
        None,
        "Name of the enhanced fan-out consumer registered on each stream read (reused when it exists). Required "
        "with `kinesis.consumerType=SubscribeToShard`.",
        Side.SOURCE,
        default_doc="required with SubscribeToShard",
    )
)
CONSUMER_NAME_PREFIX = _add(
    Option(
        "kinesis.consumerNamePrefix",
        CONSUMER_NAME_PART,
        "",
        "Prepended to `kinesis.consumerName` to form the registered name (prefix + name: at most 128 characters).",
        Side.SOURCE,
        default_doc="empty",
    )
)
SUBSCRIBE_TIMEOUT_SEC = _add(
    Option(
        "kinesis.subscribeToShard.timeoutSec",
        integer(1, 3600),
        60,
        "Longest wait for the next event of a shard subscription (AWS sends one at least every few seconds); "
        "a longer silence counts as a dropped subscription and is retried.",
        Side.SOURCE,
        unit="s",
    )
)
SUBSCRIBE_MAX_RETRIES = _add(
    Option(
        "kinesis.subscribeToShard.maxRetries",
        integer(0, 100),
        10,
        "Resubscriptions with jittered backoff after a recoverable error (ResourceInUseException, "
        "LimitExceededException, timeouts, dropped connections, 5xx) before the read fails.",
        Side.SOURCE,
    )
)
REQUIRE_CONSUMER_DEREGISTRATION = _add(
    Option(
        "kinesis.requireConsumerDeregistration",
        BOOL,
        False,
        "Deregister the enhanced fan-out consumer when the query ends (best effort). Leftover consumers cost "
        "money: `python -m connector consumers deregister` cleans up after a crash.",
        Side.SOURCE,
    )
)
STARTING_POSITION = _add(
    Option(
        "kinesis.startingPosition",
        STARTING,
        "LATEST",
        "Where a new query starts (a restart always resumes from its checkpoint): `LATEST`, `TRIM_HORIZON`, "
        "`EARLIEST` (= `TRIM_HORIZON`), `AT_TIMESTAMP:<ISO-8601 time with offset>` (the AWS connector's "
        "`AT_TIMESTAMP 2026-11-22T08:00:00Z` works too), or a JSON map of per-shard positions (see docs/source.md).",
        Side.SOURCE,
    )
)
ENDING_POSITION = _add(
    Option(
        "kinesis.endingPosition",
        ENDING,
        "LATEST",
        "Batch reads only: where reading stops. `LATEST` = the tip of each shard when the read is planned, or a "
        "JSON map of per-shard inclusive end positions (see docs/source.md).",
        Side.SOURCE,
    )
)
MAX_FETCH_RECORDS_PER_SHARD = _add(
    Option(
        "kinesis.maxFetchRecordsPerShard",
        integer(1),
        100000,
        "Most records one micro-batch reads from one shard.",
        Side.SOURCE,
        unit="records",
    )
)
MAX_FETCH_TIME_PER_SHARD_SEC = _add(
    Option(
        "kinesis.maxFetchTimePerShardSec",
        integer(1),
        None,
        "Longest time one micro-batch spends reading one shard (a batch that runs again ignores it and stops "
        "exactly where its first run stopped).",
        Side.SOURCE,
        unit="s",
        default_doc="no limit",
    )
)
DESCRIBE_SHARD_INTERVAL = _add(
    Option(
        "kinesis.describeShardInterval",
        DURATION,
        1.0,
        "Shortest time between two listings of a stream's shards by the driver.",
        Side.SOURCE,
        unit="duration",
        default_doc="1s",
    )
)
FAIL_ON_DATA_LOSS = _add(
    Option(
        "kinesis.failOnDataLoss",
        BOOL,
        False,
        "When records the query should read are gone (its position was trimmed past retention or the stream "
        "re-created, or an unfinished shard vanished): `true` fails the query naming the shard, `false` logs a "
        "warning and continues from the oldest record still there (or the shard's children). A batch that runs "
        "again and cannot find its recorded records always fails.",
        Side.SOURCE,
    )
)
MAX_RECORDS_PER_TRIGGER = _add(
    Option(
        "kinesis.maxRecordsPerTrigger",
        integer(1),
        None,
        "Most records one micro-batch reads from all shards together, shared evenly among the shards with "
        "records waiting (pyspark 4.2+ also takes Spark's own ReadMaxRows limit; `Trigger.AvailableNow` then runs "
        "several batches). Each shard still stops at `kinesis.maxFetchRecordsPerShard`.",
        Side.SOURCE,
        unit="records",
        default_doc="no limit",
    )
)
RECORDS_PER_FETCH = _add(
    Option(
        "kinesis.getRecords.numberOfRecordsPerFetch",
        integer(1, 10000),
        10000,
        "`Limit` of one GetRecords call.",
        Side.SOURCE,
        unit="records",
    )
)
FETCH_INTERVAL_MS = _add(
    Option(
        "kinesis.getRecords.fetchIntervalMs",
        integer(0),
        200,
        "Least time between the starts of two GetRecords calls on one shard (Kinesis allows 5 calls per second "
        "per shard); a call that itself took this long is followed at once. The "
        "driver's idle probes (is anything new?) run at most once per this interval per shard, and not more "
        "often than every 200 ms.",
        Side.SOURCE,
        unit="ms",
    )
)
METADATA_PATH = _add(
    Option(
        "kinesis.metadataPath",
        URL,
        None,
        "Where executors record, per batch and shard, where they stopped (exact replay): a local path, "
        "`file://`, `hdfs://` or `s3://` URI. Must be shared by driver and executors and be one per query; it is "
        "written into the offsets, so a restart finds it. Spark does not tell a Python source its checkpoint "
        "location: set this beside the checkpoint (`<checkpoint>/kinesis-metadata`).",
        Side.SOURCE,
        default_doc="`<temp dir>/aws-kinesis-metadata` (single machine only)",
    )
)
METADATA_S3_ENDPOINT_URL = _add(
    Option(
        "kinesis.metadata.s3EndpointUrl",
        URL,
        None,
        "S3 endpoint for an `s3://` `kinesis.metadataPath` (a VPC endpoint or a local S3); same credentials and "
        "region as Kinesis.",
        Side.SOURCE,
        default_doc="the region's AWS endpoint",
    )
)
_TABLE_NAME = re.compile(r"^[A-Za-z0-9_.\-]{3,255}$")


def _check_table_name(value: str) -> None:
    if not _TABLE_NAME.match(value):
        raise ValueError("a DynamoDB table name is 3-255 characters of A-Z, a-z, 0-9, _ . -")


METADATA_COMMITTER_TYPE = _add(
    Option(
        "kinesis.metadataCommitterType",
        choice("HDFS", "PATH", "DYNAMODB"),
        "HDFS",
        "Where the per-batch shard metadata lives: `HDFS` (or `PATH`) = the files under `kinesis.metadataPath` "
        "(local, HDFS or S3); `DYNAMODB` = items in the table `kinesis.dynamodb.tableName` (see docs/source.md).",
        Side.SOURCE,
    )
)
DYNAMODB_TABLE_NAME = _add(
    Option(
        "kinesis.dynamodb.tableName",
        Kind("string", "a DynamoDB table name (3-255 characters of A-Z, a-z, 0-9, _ . -)", STRING.parse),
        None,
        "The metadata table of `kinesis.metadataCommitterType=DYNAMODB` (partition key `sourceId`, sort key "
        "`batchShard`, both strings); created (on demand, TTL on `expiresAt`) when missing and allowed. Several "
        "queries may share one table: each query's items carry its own source id.",
        Side.SOURCE,
        default_doc="required for `DYNAMODB`",
        check=_check_table_name,
    )
)
DYNAMODB_ENDPOINT_URL = _add(
    Option(
        "kinesis.dynamodb.endpointUrl",
        STRING,
        None,
        "DynamoDB endpoint of the metadata table (a VPC endpoint or a local server). Not written into the offsets: "
        "a restart uses the value given then.",
        Side.SOURCE,
        default_doc="the region's AWS endpoint",
    )
)
DYNAMODB_REGION = _add(
    Option(
        "kinesis.dynamodb.region",
        STRING,
        None,
        "Region of the metadata table. Written into the offsets with the table name, so a restart finds the same "
        "items.",
        Side.SOURCE,
        default_doc="the Kinesis region",
    )
)
METADATA_NUM_RETRIES = _add(
    Option(
        "kinesis.metadataNumRetries",
        integer(0, 100),
        5,
        "Retries of a throttled, failed (5xx), timed-out or conflicting (S3 409) metadata store call (DynamoDB, "
        "S3), including DynamoDB's unprocessed batch items.",
        Side.SOURCE,
    )
)
METADATA_RETRY_INTERVALS_MS = _add(
    Option(
        "kinesis.metadataRetryIntervalsMs",
        integer(0),
        1000,
        "First metadata retry's backoff; each further retry doubles it (with jitter), up to "
        "`kinesis.metadataMaxRetryIntervalMs`.",
        Side.SOURCE,
        unit="ms",
    )
)
METADATA_MAX_RETRY_INTERVAL_MS = _add(
    Option(
        "kinesis.metadataMaxRetryIntervalMs",
        integer(0),
        10000,
        "Longest backoff between two metadata retries.",
        Side.SOURCE,
        unit="ms",
    )
)
MIN_BATCHES_TO_RETAIN = _add(
    Option(
        "kinesis.minBatchesToRetain",
        integer(2),
        100,
        "Batches whose shard metadata is kept; older ones are purged.",
        Side.SOURCE,
        unit="batches",
    )
)
SHARDS_PER_PARTITION = _add(
    Option(
        "kinesis.shardsPerPartition",
        integer(1),
        1,
        "Shards read by one Spark input partition (raise it for streams with many small shards).",
        Side.SOURCE,
        unit="shards",
    )
)
DEAGGREGATE = _add(
    Option(
        "kinesis.kpl.deaggregate",
        BOOL,
        True,
        "Split KPL-aggregated records into their user records (each with its `subSequenceNumber`).",
        Side.SOURCE,
    )
)
PASS_THROUGH_CORRUPT = _add(
    Option(
        "kinesis.kpl.passThroughCorruptAggregates",
        BOOL,
        False,
        "A record with the KPL magic but a bad MD5 or protobuf body is returned as-is (subSequenceNumber 0) "
        "instead of failing the query.",
        Side.SOURCE,
    )
)


# --- driver parallelism and names pasted from other connectors' docs -------------------------------------------
CHECK_NEW_RECORD_THREADS = _add(
    Option(
        "kinesis.checkNewRecordThreads",
        integer(1, 64),
        8,
        "Threads the driver uses to ask shards whether records are waiting before it plans a batch (the awslabs "
        "connector's option). Above 10 (a client's connection pool), extra connections are opened and dropped.",
        Side.SOURCE,
        unit="threads",
    )
)
MAX_PROBES_PER_TRIGGER = _add(
    Option(
        "kinesis.maxProbesPerTrigger",
        integer(1, 1_000_000),
        1000,
        "Most shards the driver asks per trigger whether records are waiting (one GetRecords each), those asked "
        "longest ago first; the others keep their last answer until a later trigger. Bounds planning time on "
        "streams with thousands of shards. With Trigger.AvailableNow the driver asks on until it finds records "
        "or has asked every shard, so the query does not stop early.",
        Side.SOURCE,
        unit="shards",
    )
)

# Option names other Kinesis connectors document (Databricks, qubole kinesis-sql, the awslabs connector without
# its prefix, Flink), lower-cased, mapped to ours in order of preference (the first registered one is suggested).
# Spark hands every option to the source, so without this a pasted `streamName` would be silently ignored.
# Our own names without `kinesis.` are recognised too (see `_foreign_suggestion`).
FOREIGN_NAMES: dict[str, tuple[str, ...]] = {
    "streamarn": ("kinesis.streamARN", "kinesis.streamName"),
    "endpoint": ("kinesis.endpointUrl",),
    "aws.endpoint": ("kinesis.endpointUrl",),
    "awsregion": ("kinesis.region",),
    "aws.region": ("kinesis.region",),
    "initialposition": ("kinesis.startingPosition",),
    "flink.stream.initpos": ("kinesis.startingPosition",),
    "awsaccesskey": ("kinesis.awsAccessKeyId",),
    "awssessiontoken": ("kinesis.sessionToken",),
    "rolearn": ("kinesis.stsRoleArn", "kinesis.roleArn"),
    "awsstsrolearn": ("kinesis.stsRoleArn", "kinesis.roleArn"),
    "roleexternalid": ("kinesis.stsExternalId", "kinesis.roleExternalId", "kinesis.externalId"),
    "rolesessionname": ("kinesis.stsSessionName", "kinesis.roleSessionName"),
    "awsstssessionname": ("kinesis.stsSessionName", "kinesis.roleSessionName"),
    "consumermode": ("kinesis.consumerType",),
    "consumername": ("kinesis.consumerName",),
    "kinesisregion": ("kinesis.kinesisRegion", "kinesis.region"),
    "maxrecordsperfetch": ("kinesis.getRecords.numberOfRecordsPerFetch",),
    "minfetchperiod": ("kinesis.getRecords.fetchIntervalMs",),
    "maxfetchduration": ("kinesis.maxFetchTimePerShardSec",),
    "shardfetchinterval": ("kinesis.describeShardInterval",),
    "shardspertask": ("kinesis.shardsPerPartition",),
    # qubole kinesis-sql's prefixed names (they fail as unknown `kinesis.*` options; this improves the hint)
    "kinesis.executor.maxfetchtimeinms": ("kinesis.maxFetchTimePerShardSec",),
    "kinesis.executor.maxfetchrecordspershard": ("kinesis.maxFetchRecordsPerShard",),
    "kinesis.executor.maxrecordperread": ("kinesis.getRecords.numberOfRecordsPerFetch",),
    "kinesis.client.describeshardinterval": ("kinesis.describeShardInterval",),
    "kinesis.client.numretries": ("kinesis.clientNumRetries",),
    "kinesis.client.retryintervalms": ("kinesis.clientRetryIntervalsMs",),
}


def _foreign_suggestion(key: str) -> str | None:
    """Our option a pasted name ``key`` (lower-cased) stands for: ours without the prefix, or ``FOREIGN_NAMES``."""
    candidates = (*FOREIGN_NAMES.get(key, ()), PREFIX + key)
    return next((REGISTRY[name.lower()].name for name in candidates if name.lower() in REGISTRY), None)


def foreign_option_error(key: str) -> OptionError | None:
    """The error for an option without ``kinesis.`` that names one of ours or another connector's; else None.

    A name of ``FOREIGN_NAMES`` whose equivalents are not registered (yet) fails too: the user meant something by it.
    """
    suggestion = _foreign_suggestion(key.lower())
    if suggestion is None and key.lower() in FOREIGN_NAMES:
        return OptionError(
            f"option {key!r} (another Kinesis connector's) has no equivalent in aws-kinesis yet: its options start "
            f"with `{PREFIX}` (all options: docs/options.md)"
        )
    if suggestion is None:
        return None
    return OptionError(
        f"option {key!r} is not read by aws-kinesis (its options start with `{PREFIX}`): did you mean `{suggestion}`?"
    )


# --- sink options ----------------------------------------------------------------------------------------------
AGGREGATION_ENABLED = _add(
    Option(
        "kinesis.sink.aggregationEnabled",
        BOOL,
        True,
        "Pack rows into KPL aggregated records of up to 1 MiB, one aggregate per target shard (readers de-aggregate "
        "them: this source, the KCL, aws-kinesis-agg). Many more rows per second for small rows.",
        Side.SINK,
    )
)
MAX_CONNECTIONS = _add(
    Option(
        "kinesis.sink.maxConnections",
        integer(1, 64),
        1,
        "Concurrent PutRecords calls per task (and per target stream). Rows of one partition key, or of one shard "
        "when aggregating, always go through the same call sequence, so their order holds.",
        Side.SINK,
        unit="calls",
    )
)
FLUSH_WAIT_TIME_MS = _add(
    Option(
        "kinesis.sink.flushWaitTimeMs",
        integer(0),
        100,
        "Accepted for compatibility with the awslabs connector; no effect: this sink sends a task's rows before "
        "the task ends and has nothing left to flush.",
        Side.SINK,
        unit="ms",
    )
)
RECORD_MAX_BUFFERED_TIME_MS = _add(
    Option(
        "kinesis.sink.recordMaxBufferedTimeMs",
        integer(0),
        1000,
        "Accepted for compatibility with the awslabs connector; no effect: rows are not held back to fill "
        "batches by time, a task sends its rows as soon as they are checked.",
        Side.SINK,
        unit="ms",
    )
)


# --- parsing --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParsedOptions(Mapping[str, Any]):
    """Every registered option's value (parsed, or its default) for one side, by lower-cased name.

    ``given`` holds the lower-cased names the user set. Frozen and picklable; secrets hidden from repr.
    """

    by_key: Mapping[str, Any]
    given: frozenset[str]

    def __getitem__(self, name: str) -> Any:
        return self.by_key[name.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self.by_key)

    def __len__(self) -> int:
        return len(self.by_key)

    def is_set(self, name: str) -> bool:
        return name.lower() in self.given

    def __repr__(self) -> str:
        shown = {
            REGISTRY[key].name: ("<secret>" if REGISTRY[key].secret else value)
            for key, value in self.by_key.items()
            if key in self.given
        }
        return f"ParsedOptions({shown})"


def unknown_option_error(key: str) -> OptionError:
    """The "did you mean" error for a ``kinesis.*`` name that is not registered."""
    # Compared without the shared prefix, which would make every name look alike.
    names = {option.key.removeprefix(PREFIX): option.name for option in REGISTRY.values()}
    foreign = _foreign_suggestion(key.lower()) if key.lower() in FOREIGN_NAMES else None
    bare = key.lower().removeprefix(PREFIX)
    close = (
        [foreign.lower().removeprefix(PREFIX)] if foreign else difflib.get_close_matches(bare, names, n=2, cutoff=0.75)
    )
    hint = f"; did you mean {' or '.join(names[c] for c in close)}?" if close else ""
    return OptionError(f"unknown option {key!r}{hint} (all options: docs/options.md)")


def parse_options(raw: Mapping[str, Any], side: Side) -> ParsedOptions:
    """Validate Spark's options dict for ``side`` and return every option's value.

    Keys not starting with ``kinesis.`` belong to Spark or other layers (``path``, ``checkpointLocation``) and are
    ignored, except names that are ours or another Kinesis connector's without the prefix (``streamName``): those
    fail with a "did you mean". Known options of the other side are accepted and ignored, so one options dict
    can serve a read and a write. Every problem is reported at once.
    """
    lowered = {str(key).lower(): value for key, value in raw.items()}
    spelled = {str(key).lower(): str(key) for key in raw}  # Spark lower-cases keys; direct callers may not
    problems: list[str] = []
    values: dict[str, Any] = {}
    for key, value in lowered.items():
        if not key.startswith(PREFIX):
            foreign = foreign_option_error(spelled[key])
            if foreign is not None:
                problems.append(str(foreign))
            continue
        option = REGISTRY.get(key)
        if option is None:
            problems.append(str(unknown_option_error(key)))
        elif option.side & side and value is not None:
            try:
                values[key] = option.parse(value)
            except OptionError as exc:
                problems.append(str(exc))
    given = frozenset(values)
    problems.extend(
        f"option {REGISTRY[key].name} has no effect without option {REGISTRY[REGISTRY[key].requires].name}: set both"
        for key in sorted(given)
        if REGISTRY[key].requires is not None and REGISTRY[key].requires not in given
    )
    if problems:
        raise OptionError("; ".join(problems))
    for option in REGISTRY.values():
        if option.side & side:
            values.setdefault(option.key, option.default)
    return ParsedOptions(values, given)


# --- docs -----------------------------------------------------------------------------------------------------


def _default_text(option: Option) -> str:
    if option.default_doc is not None:
        return option.default_doc
    if option.default is None:
        return "none"
    if isinstance(option.default, bool):
        return str(option.default).lower()
    return f"`{option.default}`"


def render_markdown() -> str:
    """docs/options.md: one table of every option (``python -m connector.options > docs/options.md``)."""
    lines = [
        "# aws-kinesis options",
        "",
        "Generated from `connector/options.py` by `python -m connector.options > docs/options.md`; a test checks it "
        "is up to date. Names are case-insensitive. An unknown `kinesis.*` option fails the query with a "
        '"did you mean" hint, and so does a name pasted without the prefix from these docs or another Kinesis '
        "connector's (`streamName`, `initialPosition`, `endpoint`, ...); Spark's own options (`path`, "
        "`checkpointLocation`) are left alone. A bad value fails the query naming the option, the value and what "
        "is allowed.",
        "",
        "| option | side | type | default | unit | allowed | description |",
        "|---|---|---|---|---|---|---|",
    ]
    for option in sorted(REGISTRY.values(), key=lambda o: (o.side.label() != "both", o.side.label(), o.key)):
        cells = [
            f"`{option.name}`",
            option.side.label(),
            option.kind.type_name,
            _default_text(option),
            option.unit,
            option.kind.allowed,
            option.doc,
        ]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render_markdown(), end="")
