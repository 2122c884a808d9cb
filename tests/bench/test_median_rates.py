"""``bench.common.median_rates``: runs take turns; with ``rotate`` each repeat starts its turn one run later, so that
every run comes as often right after each of the others."""

from __future__ import annotations

from bench import common


def _recording(events: list[str], *names: str) -> dict[str, object]:
    return {name: (lambda name=name: events.append(name) or sum(range(10_000))) for name in names}


def test_rotated_turns_start_one_run_later_each_repeat() -> None:
    events: list[str] = []
    rates = common.median_rates(10, 4, _recording(events, "a", "b", "c"), rotate=True)
    assert set(rates) == {"a", "b", "c"} and all(rate > 0 for rate in rates.values())
    turns = ["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]
    assert events == ["a", "b", "c", *(name for turn in turns for name in turn)]  # after the warm-up runs


def test_turns_keep_their_order_unless_rotated() -> None:
    events: list[str] = []
    common.median_rates(10, 2, _recording(events, "a", "b"))
    assert events == ["a", "b"] * 3
