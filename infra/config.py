"""Every deployment knob, read from CDK context (`cdk.json` or `-c key=value`) and validated in one place.

`app.py` calls `InfraConfig.from_context(app.node.try_get_context, keys=<every context key>)` once; the stacks only
ever see the typed, checked result. Values given with `-c` arrive as strings, so numbers and booleans are parsed
here, and every problem found is reported at once, each naming the context key, the value and what is allowed. A
key that is not one of the app's settings (`-c sourceShard=4`) is a problem too, with a "did you mean"; the keys
the CDK itself sets or reads (`is_cdk_key`) are left alone.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from infra.wheelhouse import TARGET
from pyspark_aws_kinesis.cli import did_you_mean

STREAM_MODES = ("PROVISIONED", "ON_DEMAND")
CROSS_ACCOUNT_ACCESS = ("ROLE", "RESOURCE_POLICY")  # context crossAccountAccess: role, resourcePolicy
# EMR 7.x ships Spark 3.5, which has no Python streaming data sources; the emr-spark-8 line has Spark 4.
RELEASE_LABEL_RE = re.compile(r"^emr-spark-(\d+)\.(\d+)\.(\d+)$")
MIN_RELEASE_MAJOR = 8
STREAM_NAME_RE = re.compile(r"^[a-zA-Z0-9_.-]{1,128}$")
ACCOUNT_RE = re.compile(r"^\d{12}$")
REGION_RE = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d$")
INSTANCE_TYPE_RE = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9]+$")
# sts:ExternalId: IAM allows 2-1224 characters of this set. We ask for 16 or more: the ID is what keeps another
# customer of the consumer account's from pointing it at our role (the confused deputy), and a short or guessable
# one (a name, an account number) guards nothing. 16 random characters of this set hold ~96 bits.
EXTERNAL_ID_CHARS_RE = re.compile(r"^[\w+=,.@:/-]+$")
EXTERNAL_ID_LENGTH = (16, 1224)
SUBNET_RE = re.compile(r"^subnet-[0-9a-f]{8,17}$")
S3_ZIP_URI_RE = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/.+\.zip$")
STACK_PREFIX_RE = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,63}$")
# A CloudWatch namespace the job may publish to (pyspark_aws_kinesis.metrics checks the same; "AWS/" is reserved).
CLOUDWATCH_NAMESPACE_RE = re.compile(r"^(?!AWS/)[0-9A-Za-z.\-_/#:]{1,255}$")
EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
# A consumer the stacks register for the reader account: "<consumerAccountId>-<name>", at most 128 characters.
SHARED_CONSUMER_RE = re.compile(r"^[a-zA-Z0-9_.-]{1,115}$")
MAX_SHARED_CONSUMERS = 20  # a stream's enhanced fan-out consumers (50 with On-demand Advantage)
# The cluster's Python must be the one the locked wheels are built for (infra/emr-lock.txt, infra.wheelhouse.TARGET).
PYTHON_EXECUTABLE_RE = re.compile(rf"^(/[\w.-]+)*/?{re.escape(TARGET.interpreter)}$")
ALARM_MS_RANGE = (1000, 7 * 24 * 3600 * 1000)  # 1 s to the stream's shortest retention
# Context keys of the CDK's own, besides feature flags ("@aws-cdk/...") and keys with a colon (its "aws:cdk:..."
# settings, cached lookups such as "availability-zones:account=...:region=..."): CLI settings kept in context
# (cdk.json's "cli-telemetry", `cdk acknowledge`'s "acknowledged-issue-numbers").
CDK_CONTEXT_KEYS = frozenset({"cli-telemetry", "acknowledged-issue-numbers"})


def is_cdk_key(key: str) -> bool:
    """Whether a context key is the CDK's (a feature flag, a setting or cached lookup of its own), not the app's."""
    return key.startswith("@") or ":" in key or key in CDK_CONTEXT_KEYS


class ConfigError(ValueError):
    """One or more context values are invalid; the message lists every problem, one per line."""


@dataclass(frozen=True)
class InfraConfig:
    """The validated deployment settings. Defaults are what `cdk.json` ships with."""

    account: str | None = None
    region: str | None = None
    stack_prefix: str = "KinesisSpark"
    source_stream_name: str = "kinesis-spark-source"
    sink_stream_name: str = "kinesis-spark-sink"
    stream_mode: str = "PROVISIONED"
    source_shards: int = 2
    sink_shards: int = 1
    stream_retention_hours: int = 24
    log_retention_days: int = 30
    release_label: str = "emr-spark-8.0.0"
    primary_instance_type: str = "m7g.xlarge"
    core_instance_type: str = "m7g.xlarge"
    core_instance_count: int = 2
    idle_timeout_seconds: int = 3600
    subnet_id: str | None = None
    tls_certificates_s3_uri: str | None = None
    python_executable: str = TARGET.interpreter
    consumer_account_id: str | None = None
    external_id: str | None = None
    cross_account_access: str = "ROLE"  # ROLE (assumed, with the external id) or RESOURCE_POLICY (on the stream)
    # RESOURCE_POLICY: enhanced fan-out consumers registered on the source stream for the reader, each shared
    shared_consumers: tuple[str, ...] = ()
    max_record_size_kib: int | None = None  # both streams' MaxRecordSizeInKiB (1024 unless set)
    warm_throughput_mibps: int | None = None  # on-demand streams' warm throughput (On-demand Advantage accounts)
    submit_country_counts: bool = True
    cloudwatch_namespace: str = "KinesisSpark"
    iterator_age_alarm_ms: int = 300000
    lag_alarm_ms: int = 300000
    alarm_email: str | None = None
    serverless: bool = False
    serverless_max_vcpu: int = 16
    # Where synth keeps the EMR lock's wheels (infra.wheelhouse): $KINESIS_WHEEL_CACHE, else ~/.cache/...
    wheel_cache: str | None = None
    tags: dict[str, str] = field(default_factory=lambda: {"project": "kinesis-spark-python"})

    @property
    def on_demand(self) -> bool:
        return self.stream_mode == "ON_DEMAND"

    @property
    def cross_account(self) -> bool:
        return self.consumer_account_id is not None

    @property
    def cross_account_role(self) -> bool:
        """Another account reads by assuming a role (else by the streams' resource policy)."""
        return self.cross_account and self.cross_account_access == "ROLE"

    @classmethod
    def from_context(
        cls, get: Callable[[str], Any], environ: dict[str, str] | None = None, keys: Iterable[str] = ()
    ) -> InfraConfig:
        """Build from a context getter (`app.node.try_get_context`); raise ConfigError listing every problem.

        `account` and `region` fall back to CDK_DEFAULT_ACCOUNT / CDK_DEFAULT_REGION (set by the CDK CLI from
        the caller's profile); when neither is known the stacks synthesize environment-agnostic. `keys`: every key
        the context holds (cdk.json, `-c`); one that is neither a setting nor the CDK's is an error.
        """
        env = os.environ if environ is None else environ
        reader = _Reader(get)
        config = cls(
            account=reader.optional("account", ACCOUNT_RE, "12 digits", env.get("CDK_DEFAULT_ACCOUNT")),
            region=reader.optional(
                "region", REGION_RE, "an AWS region such as eu-west-1", env.get("CDK_DEFAULT_REGION")
            ),
            stack_prefix=reader.text(
                "stackPrefix", cls.stack_prefix, STACK_PREFIX_RE, "a letter then letters, digits, '-'"
            ),
            source_stream_name=reader.text(
                "sourceStreamName", cls.source_stream_name, STREAM_NAME_RE, _STREAM_NAME_RULE
            ),
            sink_stream_name=reader.text("sinkStreamName", cls.sink_stream_name, STREAM_NAME_RE, _STREAM_NAME_RULE),
            stream_mode=reader.choice("streamMode", cls.stream_mode, STREAM_MODES),
            source_shards=reader.integer("sourceShards", cls.source_shards, 1, 500),
            sink_shards=reader.integer("sinkShards", cls.sink_shards, 1, 500),
            stream_retention_hours=reader.integer("streamRetentionHours", cls.stream_retention_hours, 24, 8760),
            log_retention_days=reader.integer("logRetentionDays", cls.log_retention_days, 1, 3650),
            release_label=reader.release_label("releaseLabel", cls.release_label),
            primary_instance_type=reader.text(
                "primaryInstanceType", cls.primary_instance_type, INSTANCE_TYPE_RE, _INSTANCE_RULE
            ),
            core_instance_type=reader.text(
                "coreInstanceType", cls.core_instance_type, INSTANCE_TYPE_RE, _INSTANCE_RULE
            ),
            core_instance_count=reader.integer("coreInstanceCount", cls.core_instance_count, 0, 50),
            idle_timeout_seconds=reader.integer("idleTimeoutSeconds", cls.idle_timeout_seconds, 60, 604800),
            subnet_id=reader.optional("subnetId", SUBNET_RE, "subnet-<8 to 17 hex digits>"),
            tls_certificates_s3_uri=reader.optional(
                "tlsCertificatesS3Uri", S3_ZIP_URI_RE, "s3://<bucket>/<key>.zip (a zip of PEM files)"
            ),
            python_executable=reader.text(
                "pythonExecutable", cls.python_executable, PYTHON_EXECUTABLE_RE, _PYTHON_RULE
            ),
            consumer_account_id=reader.optional("consumerAccountId", ACCOUNT_RE, "12 digits"),
            external_id=reader.secret("externalId", EXTERNAL_ID_CHARS_RE, EXTERNAL_ID_LENGTH, _EXTERNAL_ID_RULE),
            cross_account_access=reader.choice("crossAccountAccess", cls.cross_account_access, CROSS_ACCOUNT_ACCESS),
            shared_consumers=reader.names(
                "sharedConsumers",
                SHARED_CONSUMER_RE,
                MAX_SHARED_CONSUMERS,
                "comma-separated consumer names, each 1-115 characters of [A-Za-z0-9_.-]",
            ),
            max_record_size_kib=reader.optional_integer("maxRecordSizeKiB", 1024, 10240),
            warm_throughput_mibps=reader.optional_integer("warmThroughputMiBps", 1, 10240),
            submit_country_counts=reader.boolean("submitCountryCounts", cls.submit_country_counts),
            cloudwatch_namespace=reader.text(
                "cloudwatchNamespace",
                cls.cloudwatch_namespace,
                CLOUDWATCH_NAMESPACE_RE,
                "1-255 characters of [0-9A-Za-z.-_/#:], not starting with AWS/",
            ),
            iterator_age_alarm_ms=reader.integer("iteratorAgeAlarmMs", cls.iterator_age_alarm_ms, *ALARM_MS_RANGE),
            lag_alarm_ms=reader.integer("lagAlarmMs", cls.lag_alarm_ms, *ALARM_MS_RANGE),
            alarm_email=reader.optional("alarmEmail", EMAIL_RE, "an e-mail address such as ops@example.com"),
            serverless=reader.boolean("serverless", cls.serverless),
            serverless_max_vcpu=reader.integer("serverlessMaxVcpu", cls.serverless_max_vcpu, 4, 400),
            wheel_cache=env.get("KINESIS_WHEEL_CACHE") or None,
        )
        reader.check_pairing(config)
        reader.check_unknown(keys)
        reader.raise_if_errors()
        return config


_STREAM_NAME_RULE = "1-128 characters of [A-Za-z0-9_.-]"
_INSTANCE_RULE = "an EC2 instance type such as m7g.xlarge"
_PYTHON_RULE = (
    f"{TARGET.interpreter} or an absolute path ending in /{TARGET.interpreter}: the interpreter infra/emr-lock.txt's "
    f"wheels are for (another version: change infra.wheelhouse.TARGET and run `make emr-lock`)"
)
_EXTERNAL_ID_RULE = (
    f"{EXTERNAL_ID_LENGTH[0]}-{EXTERNAL_ID_LENGTH[1]} characters of [A-Za-z0-9_+=,.@:/-]; make one with "
    "`python -c 'import secrets; print(secrets.token_urlsafe(24))'`"
)


class _Reader:
    """Reads context values one by one, collecting every problem instead of stopping at the first."""

    def __init__(self, get: Callable[[str], Any]):
        self._get = get
        self.errors: list[str] = []
        self.read: set[str] = set()  # every key asked for: the app's settings

    def _error(self, key: str, value: Any, allowed: str) -> None:
        self.errors.append(f"context {key!r}: got {value!r}; allowed: {allowed}")

    def _raw(self, key: str) -> Any:
        self.read.add(key)
        value = self._get(key)
        return None if value is None or (isinstance(value, str) and value.strip() == "") else value

    def text(self, key: str, default: str, pattern: re.Pattern[str], allowed: str) -> str:
        value = self._raw(key)
        if value is None:
            return default
        if not isinstance(value, str) or not pattern.match(value):
            self._error(key, value, allowed)
            return default
        return value

    def optional(self, key: str, pattern: re.Pattern[str], allowed: str, fallback: str | None = None) -> str | None:
        value = self._raw(key)
        if value is None:
            return fallback or None
        if not isinstance(value, str) or not pattern.match(value):
            self._error(key, value, allowed)
            return None
        return value

    def secret(self, key: str, pattern: re.Pattern[str], length: tuple[int, int], allowed: str) -> str | None:
        """An optional secret: checked like `optional`, but an error shows its length, never the value."""
        value = self._raw(key)
        if value is None:
            return None
        if not isinstance(value, str) or not pattern.match(value) or not length[0] <= len(value) <= length[1]:
            shown = f"{len(value)} characters" if isinstance(value, str) else type(value).__name__
            self.errors.append(f"context {key!r}: got {shown} (value not shown); allowed: {allowed}")
            return None
        return value

    def choice(self, key: str, default: str, choices: tuple[str, ...]) -> str:
        value = self._raw(key)
        if value is None:
            return default
        normalized = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", str(value)).upper().replace("-", "_")  # resourcePolicy
        if normalized not in choices:
            self._error(key, value, " or ".join(choices))
            return default
        return normalized

    def names(self, key: str, pattern: re.Pattern[str], most: int, allowed: str) -> tuple[str, ...]:
        """A comma-separated list of distinct names (empty when not given)."""
        value = self._raw(key)
        if value is None:
            return ()
        names = [name.strip() for name in str(value).split(",")]
        if not all(pattern.match(name) for name in names) or len(set(names)) != len(names) or len(names) > most:
            self._error(key, value, f"{allowed}; distinct; at most {most}")
            return ()
        return tuple(names)

    def integer(self, key: str, default: int, low: int, high: int) -> int:
        value = self._raw(key)
        if value is None:
            return default
        allowed = f"an integer from {low} to {high}"
        # bool is an int subclass; `true` is never a shard count.
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            self._error(key, value, allowed)
            return default
        try:
            number = int(value)
        except ValueError:
            self._error(key, value, allowed)
            return default
        if not low <= number <= high:
            self._error(key, value, allowed)
            return default
        return number

    def optional_integer(self, key: str, low: int, high: int) -> int | None:
        """An integer setting with no default: None unless given."""
        if self._raw(key) is None:
            return None
        number = self.integer(key, low - 1, low, high)
        return None if number == low - 1 else number

    def boolean(self, key: str, default: bool) -> bool:
        value = self._raw(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        self._error(key, value, "true or false")
        return default

    def release_label(self, key: str, default: str) -> str:
        value = self._raw(key)
        if value is None:
            return default
        match = RELEASE_LABEL_RE.match(str(value))
        if not match or int(match.group(1)) < MIN_RELEASE_MAJOR:
            self._error(
                key,
                value,
                f"an emr-spark-{MIN_RELEASE_MAJOR}.x.y release such as {default} (Spark 4; emr-7.x and older "
                "ship Spark 3.5, which has no Python streaming data sources)",
            )
            return default
        return str(value)

    def check_pairing(self, config: InfraConfig) -> None:
        """The cross-account role needs both halves: who may assume it, and the secret they must present."""
        if config.cross_account_role and not config.external_id:
            self.errors.append("context 'externalId' is required when 'consumerAccountId' is set")
        if config.external_id and config.cross_account_access != "ROLE":
            self.errors.append("context 'externalId' is for crossAccountAccess=role: a resource policy takes none")
        if self._raw("crossAccountAccess") is not None and not config.cross_account:
            self.errors.append("context 'consumerAccountId' is required when 'crossAccountAccess' is set")
        if config.shared_consumers and (not config.cross_account or config.cross_account_role):
            self.errors.append(
                "context 'sharedConsumers' is for crossAccountAccess=resourcePolicy (with the role, the reader "
                "registers its own consumers)"
            )
        if config.warm_throughput_mibps is not None and not config.on_demand:
            self.errors.append(
                "context 'warmThroughputMiBps' is for on-demand streams (streamMode=ON_DEMAND, in an account with "
                "On-demand Advantage)"
            )
        if config.external_id and not config.consumer_account_id and self._raw("externalId") is not None:
            self.errors.append("context 'consumerAccountId' is required when 'externalId' is set")
        if config.source_stream_name == config.sink_stream_name:
            self.errors.append(
                f"context 'sourceStreamName' and 'sinkStreamName' are both {config.source_stream_name!r}; "
                "they must differ"
            )

    def check_unknown(self, keys: Iterable[str]) -> None:
        """A key given that is none of the settings read (and not the CDK's): a typo, or a setting this app lacks."""
        for key in sorted(set(keys) - self.read):
            if not is_cdk_key(key):
                hint = did_you_mean(key, self.read)
                self.errors.append(
                    f"context {key!r}: not a setting of this app" + (f" ({hint})" if hint else "") + "; allowed: "
                    "the keys of cdk.json's context, account and region (docs/infra.md, Settings)"
                )

    def raise_if_errors(self) -> None:
        if len(self.errors) == 1:  # one line: "CDK context 'sourceShard': not a setting of this app (...)"
            raise ConfigError(f"CDK {self.errors[0]}")
        if self.errors:
            raise ConfigError("invalid CDK context:\n  " + "\n  ".join(self.errors))
