"""KDG templates: text with ``{{module.method(args)}}`` placeholders, parsed and compiled once, rendered fast.

Who calls it: ``kinesis_generator.run`` / the CLI compile the record and partition-key templates before anything is
sent; the benchmark renders the seed template in a loop. Arguments are JSON when they parse as JSON, else a
plain string (as in the KDG). A bad template raises ``TemplateError`` naming the placeholder, its line and
column, and the known helpers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kinesis_generator.helpers import NO_ARGS, Context, HelperArgumentError, known_helpers, lookup

_NAME = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*)\s*")


class TemplateError(ValueError):
    """A template that cannot be compiled; ``line`` and ``column`` are 1-based, of the placeholder's ``{{``."""

    def __init__(self, problem: str, placeholder: str, line: int, column: int, show_helpers: bool = True):
        self.placeholder, self.line, self.column = placeholder, line, column
        helpers = f"\nKnown helpers: {', '.join(known_helpers())}" if show_helpers else ""
        super().__init__(f"template line {line}, column {column}: {problem} in placeholder {placeholder!r}{helpers}")


@dataclass(frozen=True)
class Placeholder:
    """One parsed ``{{...}}``: where it starts in the template, its text, helper name and arguments."""

    start: int
    end: int
    text: str
    name: str
    args: Any


def _position(source: str, offset: int) -> tuple[int, int]:
    line = source.count("\n", 0, offset) + 1
    return line, offset - (source.rfind("\n", 0, offset) + 1) + 1


def _error(source: str, start: int, end: int, problem: str, show_helpers: bool = False) -> TemplateError:
    line, column = _position(source, start)
    return TemplateError(problem, source[start:end], line, column, show_helpers)


def _close_paren(source: str, open_at: int) -> int:
    """Index of the ``)`` matching the ``(`` at ``open_at``, skipping brackets and quotes inside JSON strings."""
    depth, quote, index = 0, "", open_at
    while index < len(source):
        char = source[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return index if char == ")" else -1
        index += 1
    return -1


def _parse_args(raw: str) -> Any:
    """JSON if it parses, else the plain string (quotes around a lone string are dropped)."""
    raw = raw.strip()
    if not raw:
        return NO_ARGS
    try:
        return json.loads(raw)
    except ValueError:
        if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
            return raw[1:-1]
        return raw


def parse(source: str) -> tuple[list[str], list[Placeholder]]:
    """Split ``source`` into literal texts and placeholders (len(literals) == len(placeholders) + 1)."""
    literals: list[str] = []
    placeholders: list[Placeholder] = []
    position = 0
    while (start := source.find("{{", position)) >= 0:
        match = _NAME.match(source, start + 2)
        if not match:
            end = source.find("}}", start)
            raise _error(source, start, end + 2 if end >= 0 else len(source), "expected module.method", True)
        index, args = match.end(), NO_ARGS
        if source.startswith("(", index):
            close = _close_paren(source, index)
            if close < 0:
                raise _error(source, start, min(len(source), index + 40), "unbalanced parentheses or quotes")
            args = _parse_args(source[index + 1 : close])
            index = close + 1
        while index < len(source) and source[index].isspace():
            index += 1
        if not source.startswith("}}", index):
            raise _error(source, start, min(len(source), index + 1), "expected '}}' after the helper call")
        end = index + 2
        literals.append(source[position:start])
        placeholders.append(Placeholder(start, end, source[start:end], match.group(1), args))
        position = end
    literals.append(source[position:])
    return literals, placeholders


class Template:
    """A compiled template: ``render()`` returns one filled-in string. Compile with ``Template(source, ctx)``."""

    def __init__(self, source: str, ctx: Context | None = None):
        self.source = source
        self.ctx = ctx or Context()
        literals, placeholders = parse(source)
        self.placeholders = placeholders
        self.render: Callable[[], str] = _build(literals, [self._compile(p) for p in placeholders])
        self.render()  # a helper that fails on its first value fails here, before anything is sent

    def _compile(self, placeholder: Placeholder) -> Callable[[], Any]:
        factory = lookup(placeholder.name, self.ctx)
        if factory is None:
            raise _error(self.source, placeholder.start, placeholder.end, f"unknown helper {placeholder.name!r}", True)
        try:
            fn = factory(self.ctx, placeholder.args)
            fn()  # Faker methods check their arguments only when called
        except (HelperArgumentError, TypeError, ValueError, AttributeError) as exc:
            raise _error(self.source, placeholder.start, placeholder.end, f"{placeholder.name}: {exc}") from None
        return fn

    def render_bytes(self) -> bytes:
        return self.render().encode("utf-8")


def _build(literals: list[str], fns: list[Callable[[], Any]]) -> Callable[[], str]:
    """One closure per template shape: the common short templates avoid a loop per render."""
    if not fns:
        text = literals[0]
        return lambda: text
    pairs = list(zip(literals[1:], fns, strict=True))
    head = literals[0]
    if len(pairs) == 3:
        (l1, f1), (l2, f2), (l3, f3) = pairs
        return lambda: f"{head}{f1()}{l1}{f2()}{l2}{f3()}{l3}"
    # Placeholder i sits before literal i + 1.
    return lambda: head + "".join(f"{fn()}{lit}" for lit, fn in pairs)
