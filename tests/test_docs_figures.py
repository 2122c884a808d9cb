"""Figures quoted in several places agree with their one source, for pytest: the put → row latency ratios of
README.md, CHANGELOG.md and docs/benchmarks.md are the range of the current runs in ``bench/results/latency.txt``
(the lines before ``# earlier results``), and the demo's duration is written in docs/jobs.md only (the Makefile
points there)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUOTING_LATENCY = ("README.md", "CHANGELOG.md", "docs/benchmarks.md")
DASHES, TIMES = "-\u2013", "\u00d7"  # a range: low, a hyphen or an en dash, high, the multiplication sign


def current_latency_ratios() -> dict[str, list[float]]:
    """p50 against Spark's floor per phase (``default``, ``low-latency``) of each current run of bench.latency."""
    text = (ROOT / "bench/results/latency.txt").read_text().split("\n# earlier results")[0]
    ratios: dict[str, list[float]] = {"default": [], "low-latency": []}
    for phase, ratio in re.findall(
        r"aws-kinesis, (default|low-latency) options.*p50 ([\d.]+)x / p99 [\d.]+x Spark", text
    ):
        ratios[phase].append(float(ratio))
    return ratios


def quoted_range(values: list[float]) -> re.Pattern[str]:
    low, high = min(values), max(values)
    return re.compile(rf"{low:.2f}\s*[{DASHES}]\s*{high:.2f}{TIMES}")


def test_the_latency_ratios_quoted_are_the_results_files() -> None:
    ratios = current_latency_ratios()
    assert len(ratios["default"]) == len(ratios["low-latency"]) >= 3, ratios
    for name in QUOTING_LATENCY:
        text = " ".join((ROOT / name).read_text().split())
        for phase, values in ratios.items():
            assert quoted_range(values).search(text), f"{name} does not quote {phase}'s {quoted_range(values).pattern}"


def test_the_demos_duration_is_written_once() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert not re.search(r"~\s*\d+\s*s\b", makefile), "the Makefile points to docs/jobs.md for how long the demo takes"
    assert "make demo-short" in (ROOT / "docs/jobs.md").read_text()
    assert "docs/jobs.md" in makefile[makefile.index("demo-short:") - 200 : makefile.index("demo-short:")]
