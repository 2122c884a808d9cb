"""The option record and the registry: every option registered once, parsed and checked against it.

Who calls it: the option modules register their options with ``add``; ``parse_options`` (the source's and the
sink's settings, ``aws.settings``) validates Spark's options dict for one side and returns every value;
``docs`` renders the registry. Spark hands a data source its options with the keys lower-cased, so every lookup
here is by lower-cased name; the canonical camelCase spelling (the awslabs connector's) is kept for docs and
error messages. Names pasted from other Kinesis connectors' docs (``FOREIGN_NAMES``) fail with a "did you mean".
"""

from __future__ import annotations

import difflib
import enum
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ..errors import KinesisConnectorError
from .kinds import ENDPOINT, HiddenValueError, Kind, is_loopback

PREFIX = "kinesis."
ALLOW_HTTP_KEY = "kinesis.allowhttpendpoints"  # common.ALLOW_HTTP_ENDPOINTS (registered there)


class OptionError(KinesisConnectorError, ValueError):
    """A bad option: the message names the option, the value given and what is allowed."""


class Side(enum.Flag):
    """Which side of the connector reads an option."""

    SOURCE = enum.auto()
    SINK = enum.auto()
    BOTH = SOURCE | SINK

    def label(self) -> str:
        return {Side.SOURCE: "source", Side.SINK: "sink"}.get(self, "both")


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


def add(option: Option) -> Option:
    """Register ``option`` (its name starts with ``kinesis.``, and is new); returns it."""
    if not option.key.startswith(PREFIX):
        raise ValueError(f"option {option.name} must start with {PREFIX!r}")
    if option.key in REGISTRY:
        raise ValueError(f"option {option.name} is registered twice")
    REGISTRY[option.key] = option
    return option


def get(name: str) -> Option:
    """The registered option called ``name`` (any case)."""
    return REGISTRY[name.lower()]


# Other Kinesis connectors' option names, lower-cased, mapped to ours (the first registered is suggested): Spark
# hands every option over, so a pasted `streamName` would be silently ignored.
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


def _plain_http_problems(values: Mapping[str, Any]) -> list[str]:
    """An endpoint option's ``http://`` URL to a host that is not loopback, unless ``kinesis.allowHttpEndpoints``."""
    if values.get(ALLOW_HTTP_KEY):
        return []
    problems = []
    for key, value in values.items():
        parts = urlsplit(value) if REGISTRY[key].kind is ENDPOINT else None
        if parts is not None and parts.scheme.lower() == "http" and not is_loopback(parts.hostname or ""):
            problems.append(
                f"option {REGISTRY[key].name}={value!r} is invalid (plain http to {parts.hostname}, which is not a "
                f"loopback host): use https://, or set {REGISTRY[ALLOW_HTTP_KEY].name}=true to send requests in clear"
            )
    return problems


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
    problems.extend(_plain_http_problems(values))
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
