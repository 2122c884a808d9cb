"""How a long run's gauges are judged, by rules fixed before the run: each gauge's baseline is the median of its
first three judged samples; it passes when no judged sample strays from the baseline by more than its bound, and the
least-squares line through the judged samples moves by no more than the bound over the judged span (its drift: a
leak shows there even where single samples stay inside the band). A gauge judged on its rises only (``rises_only``:
what must stay bounded, where a fall is not growth) passes however far it falls.

Who calls it: ``bench.soak`` (the hour-long query) and ``bench.driver_soak`` (a million triggers). Not a benchmark
itself (run_all skips it).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Judged:
    """One gauge's verdict: its baseline, its bound, the largest deviation of any judged sample, its drift."""

    baseline: float
    bound: float
    deviation: float  # the largest distance of a sample from the baseline; with rises_only, the largest rise
    drift: float
    rises_only: bool = False

    @property
    def within(self) -> bool:
        trend = self.drift if self.rises_only else abs(self.drift)
        return self.deviation <= self.bound and trend <= self.bound

    @classmethod
    def of(cls, points: list[tuple[float, float]], tolerance: float, slack: float, rises_only: bool = False) -> Judged:
        """``points`` (time, value), judged with a bound of ``tolerance`` times the baseline, at least ``slack``."""
        values = [value for _, value in points]
        baseline = statistics.median(values[:3])
        bound = max(tolerance * abs(baseline), slack)
        away = [value - baseline if rises_only else abs(value - baseline) for value in values]
        return cls(baseline, bound, max(max(away), 0.0), drift(points), rises_only)


def drift(points: list[tuple[float, float]]) -> float:
    """The least-squares slope of ``points`` times their span: how far the trend moves over the judged time."""
    if len(points) < 2:
        return 0.0
    times, values = [t for t, _ in points], [v for _, v in points]
    slope = statistics.linear_regression(times, values).slope if len(set(times)) > 1 else 0.0
    return slope * (times[-1] - times[0])


def gauge_table(found: dict[str, Judged]) -> list[str]:
    """One line per gauge: baseline, bound, largest deviation, drift, and OUT for one outside its bound."""
    lines = [f"{'gauge':<24}{'baseline':>10}{'bound':>9}{'max dev':>9}{'drift':>9}"]
    for name, judged in found.items():
        mark = "" if judged.within else "  OUT"
        lines.append(
            f"{name:<24}{judged.baseline:>10.1f}{judged.bound:>9.1f}{judged.deviation:>9.1f}{judged.drift:>+9.1f}{mark}"
        )
    return lines
