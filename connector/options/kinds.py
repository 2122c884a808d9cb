"""How a raw option string becomes a value: the kinds of values options take, and what each allows in words.

Who calls it: the option modules (``common``, ``source``, ``metadata``, ``sink``) give each ``Option`` a kind;
``Option.parse`` (``registry``) applies it. A kind that finds a secret in a value raises ``HiddenValueError``,
whose message names the problem but never echoes the value.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


class HiddenValueError(ValueError):
    """Raised by a check whose value may hold a secret: the error names the option but never echoes the value."""


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
STRING = Kind("string", "a non-empty string", lambda raw: raw if raw.strip() else refuse())


def refuse() -> Any:
    raise ValueError


def integer(minimum: int | None = None, maximum: int | None = None) -> Kind:
    """An integer within [minimum, maximum] (either bound may be open)."""

    def parse(raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ValueError from None  # not int()'s "invalid literal ...": the option's error says what is allowed
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
LOOPBACK_NAMES = frozenset({"localhost", "::1"})


def is_loopback(host: str) -> bool:
    """``localhost``, ``::1`` or an address in 127.0.0.0/8: traffic that never leaves the machine."""
    try:
        return host.lower() in LOOPBACK_NAMES or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _endpoint(raw: str) -> str:
    """An ``http(s)://host[:port][/path]`` URL with no user info (whether ``http`` is allowed for its host is
    ``registry.parse_options``'s check, which sees the ``kinesis.allowHttpEndpoints`` option too)."""
    value = _url(raw)
    parts = urlsplit(value)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError("an endpoint is https://<host>[:<port>]")
    parts.port  # noqa: B018 (raises ValueError for a port that is not a number in range)
    return value


ENDPOINT = Kind("endpoint", "an https:// URL (http:// for a loopback host), no user info", _endpoint)
ROLE_ARN = _pattern(
    "ARN",
    "an IAM role ARN, arn:<partition>:iam::<12-digit account>:role/<path/name>",
    r"arn:aws[a-z-]*:iam::\d{12}:role/(?:[\w+=,.@-]+/)*[\w+=,.@-]{1,64}",
)
SESSION_NAME = _pattern("string", "2-64 characters of A-Z a-z 0-9 _ + = , . @ -", r"[\w+=,.@-]{2,64}")
EXTERNAL_ID = _pattern("string", "2-1224 characters of A-Z a-z 0-9 _ + = , . @ : / -", r"[\w+=,.@:/-]{2,1224}")
REGION_NAME = _pattern("region", "an AWS region name such as eu-west-1", r"[a-z]{2}(?:-[a-z]+)+-\d+")
