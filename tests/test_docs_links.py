"""Every relative link and image of README.md, CONTRIBUTING.md, CHANGELOG.md and docs/*.md leads somewhere: the file
exists in the checkout, and a ``#anchor`` into a Markdown file names one of its headings (GitHub's slugs: lower
case, punctuation dropped, spaces to hyphens). Links to the web are not fetched."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")
FENCE = re.compile(r"^(```|~~~)")


def doc_files() -> list[Path]:
    top = [ROOT / name for name in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md") if (ROOT / name).exists()]
    return top + sorted((ROOT / "docs").glob("*.md"))


def prose_lines(path: Path) -> list[tuple[int, str]]:
    """``(line number, text)`` of the lines outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading).strip().lower()
    return re.sub(r"\s", "-", re.sub(r"[^\w\- ]", "", text))


@cache
def anchors(path: Path) -> frozenset[str]:
    found, seen = set(), {}
    for _, line in prose_lines(path):
        match = HEADING.match(line)
        if match:
            base = slug(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


def broken_links(path: Path) -> list[str]:
    broken = []
    for number, line in prose_lines(path):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
                continue
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            where = f"{path.relative_to(ROOT)}:{number}: {target}"
            if not linked.exists():
                broken.append(f"{where}: no such file")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{where}: no heading #{anchor} in {linked.relative_to(ROOT)}")
    return broken


@pytest.mark.parametrize("path", doc_files(), ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_leads_somewhere(path: Path) -> None:
    broken = broken_links(path)
    assert not broken, "\n".join(broken)


def test_slugs_are_githubs() -> None:
    assert slug("Offsets, the metadata store and exact replay") == "offsets-the-metadata-store-and-exact-replay"
    assert slug("`make demo`") == "make-demo"
    assert slug("Lost data: `kinesis.failOnDataLoss`") == "lost-data-kinesisfailondataloss"
    assert slug("Retention: records trimmed as days pass (`FaultProxy.trim`)") == (
        "retention-records-trimmed-as-days-pass-faultproxytrim"
    )
