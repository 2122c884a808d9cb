"""moment.js-style date formats (``YYYY-MM-DD hh:mm:ss``), compiled once into a fast formatter.

Used by ``kinesis_generator.helpers`` for ``date.now(format)`` and ``date.utc(format)``, as in the KDG templates.
Tokens follow moment.js: text in ``[brackets]`` is literal, anything that is not a token is copied as is.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime

Formatter = Callable[[datetime], str]

# Longest tokens first so that "YYYY" wins over "YY" and "MMMM" over "MM".
_TOKENS: dict[str, Callable[[datetime], str]] = {
    "YYYY": lambda d: f"{d.year:04d}",
    "YY": lambda d: f"{d.year % 100:02d}",
    "MMMM": lambda d: d.strftime("%B"),
    "MMM": lambda d: d.strftime("%b"),
    "MM": lambda d: f"{d.month:02d}",
    "M": lambda d: str(d.month),
    "DDDD": lambda d: f"{d.timetuple().tm_yday:03d}",
    "DD": lambda d: f"{d.day:02d}",
    "Do": lambda d: _ordinal(d.day),
    "D": lambda d: str(d.day),
    "dddd": lambda d: d.strftime("%A"),
    "ddd": lambda d: d.strftime("%a"),
    "d": lambda d: str((d.weekday() + 1) % 7),
    "HH": lambda d: f"{d.hour:02d}",
    "H": lambda d: str(d.hour),
    "hh": lambda d: f"{(d.hour % 12) or 12:02d}",
    "h": lambda d: str((d.hour % 12) or 12),
    "mm": lambda d: f"{d.minute:02d}",
    "m": lambda d: str(d.minute),
    "ss": lambda d: f"{d.second:02d}",
    "s": lambda d: str(d.second),
    "SSS": lambda d: f"{d.microsecond // 1000:03d}",
    "SS": lambda d: f"{d.microsecond // 10000:02d}",
    "S": lambda d: str(d.microsecond // 100000),
    "A": lambda d: "AM" if d.hour < 12 else "PM",
    "a": lambda d: "am" if d.hour < 12 else "pm",
    "ZZ": lambda d: _offset(d, ""),
    "Z": lambda d: _offset(d, ":"),
    "X": lambda d: str(int(d.timestamp())),
    "x": lambda d: str(int(d.timestamp() * 1000)),
}
_TOKEN_RE = re.compile(r"\[[^\]]*\]|" + "|".join(sorted(_TOKENS, key=len, reverse=True)))
# Tokens that change more often than once a second: a format without them can be cached per second.
SUB_SECOND_TOKENS = frozenset({"SSS", "SS", "S", "x"})
# moment's default format (``moment().format()``).
DEFAULT_FORMAT = "YYYY-MM-DDTHH:mm:ssZ"


def _ordinal(day: int) -> str:
    suffix = "th" if 11 <= day % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def _offset(d: datetime, separator: str) -> str:
    delta = d.utcoffset()
    minutes = int(delta.total_seconds() // 60) if delta is not None else 0
    sign = "+" if minutes >= 0 else "-"
    hours, minutes = divmod(abs(minutes), 60)
    return f"{sign}{hours:02d}{separator}{minutes:02d}"


def compile_format(fmt: str) -> tuple[Formatter, bool]:
    """A function that formats a datetime as ``fmt`` says, and whether its output changes within a second."""
    parts: list[str | Callable[[datetime], str]] = []
    sub_second = False
    position = 0
    for match in _TOKEN_RE.finditer(fmt):
        if match.start() > position:
            parts.append(fmt[position : match.start()])
        token = match.group()
        if token.startswith("["):
            parts.append(token[1:-1])
        else:
            parts.append(_TOKENS[token])
            sub_second = sub_second or token in SUB_SECOND_TOKENS
        position = match.end()
    if position < len(fmt):
        parts.append(fmt[position:])

    def format_datetime(d: datetime) -> str:
        return "".join(part if isinstance(part, str) else part(d) for part in parts)

    return format_datetime, sub_second
