"""How the connector names a stream: by its name (``kinesis.streamName``) or by its ARN (``kinesis.streamARN``).

A stream given by ARN keeps the ARN as its id everywhere: in offsets, in the metadata store, in metrics, and in every
call to Kinesis (``StreamARN``, which another account's stream shared by a resource policy needs: a name resolves in
the caller's own account). Who calls it: the option parsers of both sides, every call that names a stream
(``stream_param``), the metadata stores (``storage_key``) and the rows' ``streamName`` column (``stream_name``).
docs/source.md, "Streams of another account".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .options import ParsedOptions

_NAME = r"[a-zA-Z0-9_.-]{1,128}"
STREAM_NAME = re.compile(rf"^{_NAME}$")
# arn:<partition>:kinesis:<region>:<12-digit account>:stream/<name> (AWS's pattern for StreamARN)
STREAM_ARN = re.compile(rf"^arn:(aws[a-z-]*):kinesis:([a-z0-9-]+):(\d{{12}}):stream/({_NAME})$")


@dataclass(frozen=True)
class StreamArn:
    """The parts of a stream's ARN."""

    partition: str
    region: str
    account: str
    name: str

    @classmethod
    def parse(cls, arn: str) -> StreamArn | None:
        """The parts of ``arn``; None when it is not a Kinesis stream ARN."""
        found = STREAM_ARN.match(arn)
        return cls(*found.groups()) if found else None


def is_arn(stream_id: str) -> bool:
    return stream_id.startswith("arn:")


def stream_name(stream_id: str) -> str:
    """The stream's name: ``stream_id`` itself, or the name in its ARN."""
    return stream_id.rpartition(":stream/")[2] if is_arn(stream_id) else stream_id


def stream_param(stream_id: str) -> dict[str, Any]:
    """The parameter that names the stream in a Kinesis call: ``StreamARN`` for an ARN, else ``StreamName``."""
    return {"StreamARN": stream_id} if is_arn(stream_id) else {"StreamName": stream_id}


def arn_param(stream_id: str) -> dict[str, Any]:
    """``StreamARN`` for a call that may name the stream but needs not (GetRecords): only for an ARN."""
    return {"StreamARN": stream_id} if is_arn(stream_id) else {}


def storage_key(stream_id: str) -> str:
    """A stream's id as a metadata key part (letters, digits, ``_ . - @`` only): the name, or for an ARN
    ``<name>@<account>.<region>`` (``.<partition>`` added outside ``aws``). ``@`` is not allowed in stream names, so
    streams of the same name in two accounts or regions never share a key, nor with a stream given by name."""
    arn = StreamArn.parse(stream_id) if is_arn(stream_id) else None
    if arn is None:
        return stream_id
    suffix = "" if arn.partition == "aws" else f".{arn.partition}"
    return f"{arn.name}@{arn.account}.{arn.region}{suffix}"


def streams_of(parsed: ParsedOptions, required: bool = True) -> tuple[str, ...]:
    """The stream ids ``kinesis.streamName`` or ``kinesis.streamARN`` give (comma-separated, each once); raises
    OptionError for both, neither (when ``required``), a bad name or ARN, or ARNs of several regions."""
    from . import options as opts

    names, arns = parsed[opts.STREAM_NAME.key], parsed[opts.STREAM_ARN.key]
    if names is not None and arns is not None:
        raise opts.OptionError(
            f"options {opts.STREAM_NAME.name} and {opts.STREAM_ARN.name} are both set: give one of them"
        )
    option, value = (opts.STREAM_ARN, arns) if arns is not None else (opts.STREAM_NAME, names)
    if value is None:
        if required:
            raise opts.OptionError(
                f"option {opts.STREAM_NAME.name} (or {opts.STREAM_ARN.name}) is required: the stream(s) to read, "
                "comma-separated"
            )
        return ()
    streams = tuple(part.strip() for part in value.split(","))
    valid = (lambda s: StreamArn.parse(s) is not None) if arns is not None else STREAM_NAME.match
    bad = [stream for stream in streams if not valid(stream)]
    if bad:
        allowed = (
            "ARNs arn:aws:kinesis:<region>:<12-digit account>:stream/<name>"
            if arns is not None
            else "names of 1-128 characters of a-z, A-Z, 0-9, _ . -"
        )
        raise opts.OptionError(f"option {option.name}={value!r} is invalid: {bad} must be stream {allowed}")
    if len(set(streams)) != len(streams):
        raise opts.OptionError(f"option {option.name}={value!r} names a stream twice")
    regions = sorted({arn.region for arn in map(StreamArn.parse, streams) if arn is not None})
    if len(regions) > 1:
        raise opts.OptionError(
            f"option {option.name}={value!r} names streams in {len(regions)} regions ({', '.join(regions)}): one "
            "query's streams share a region (read the others in another query)"
        )
    return streams


def stream_option(streams: tuple[str, ...]) -> str:
    """The option that names ``streams``: ``kinesis.streamARN`` for ARNs, else ``kinesis.streamName``."""
    from . import options as opts

    return opts.STREAM_ARN.name if any(map(is_arn, streams)) else opts.STREAM_NAME.name


def first_stream(parsed: ParsedOptions) -> str | None:
    """The first stream ``kinesis.streamName`` or ``kinesis.streamARN`` names, unchecked (``streams_of`` checks)."""
    from . import options as opts

    value = parsed[opts.STREAM_NAME.key] or parsed[opts.STREAM_ARN.key]
    return value.split(",")[0].strip() if value else None


def arn_region(parsed: ParsedOptions) -> str | None:
    """The region of the streams ``kinesis.streamARN`` names (None without it)."""
    first = first_stream(parsed)
    arn = StreamArn.parse(first) if first and is_arn(first) else None
    return arn.region if arn else None
