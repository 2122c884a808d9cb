"""How a long run's gauges are judged: the band around the first judged samples, and the drift of the trend."""

from __future__ import annotations

from bench.judge import Judged, drift


def _points(values: list[float]) -> list[tuple[float, float]]:
    return [(60.0 * minute, value) for minute, value in enumerate(values)]


def test_a_slow_leak_inside_the_band_is_caught_by_its_drift() -> None:
    """+0.5 MiB a minute for 60 minutes with +-10 MiB of noise: no sample leaves a 24 MiB band around the first
    ones' median for a while, but the trend moves 30 MiB."""
    noise = [10, -10, 5, -5, 0, 8, -8] * 9
    leak = _points([80 + 0.5 * minute + noise[minute] for minute in range(61)])
    assert abs(drift(leak) - 30) < 3
    flat = _points([80 + noise[minute] for minute in range(61)])
    assert abs(drift(flat)) < 3
    assert Judged.of(flat, tolerance=0.0, slack=24).within
    assert not Judged.of(leak, tolerance=0.0, slack=24).within


def test_the_bound_is_a_share_of_the_baseline_but_never_under_the_slack() -> None:
    steady = _points([100.0, 100.0, 100.0, 120.0])
    assert Judged.of(steady, tolerance=0.25, slack=1).bound == 25
    assert not Judged.of(steady, tolerance=0.10, slack=1).within
    assert Judged.of(steady, tolerance=0.10, slack=30).bound == 30


def test_a_gauge_judged_on_its_rises_passes_a_fall_of_any_size_but_not_a_rise() -> None:
    falling = _points([290.0, 287.0, 288.0, 280.0, 200.0, 147.0])
    assert not Judged.of(falling, tolerance=0.10, slack=40).within
    assert Judged.of(falling, tolerance=0.10, slack=40, rises_only=True).within
    rising = _points([290.0, 287.0, 288.0, 300.0, 340.0])
    assert not Judged.of(rising, tolerance=0.10, slack=40, rises_only=True).within
    leak = _points([80 + 0.5 * minute for minute in range(61)])
    judged = Judged.of(leak, tolerance=0.0, slack=24, rises_only=True)
    assert judged.deviation == 29.5 and not judged.within  # 110 against the first three samples' median, 80.5
