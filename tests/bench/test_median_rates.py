"""``bench.common.median_rates``: runs take turns; with ``balanced`` the turns follow ``balanced_turns``, each
after an unmeasured run of its first run, so that every run comes as often right after each of the others."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

import pytest

from bench import common


def _recording(events: list[str], *names: str) -> dict[str, object]:
    return {name: (lambda name=name: events.append(name) or sum(range(10_000))) for name in names}


@pytest.mark.parametrize("count", [2, 3, 4, 5])
def test_balanced_turns_put_each_run_as_often_right_after_each_other(count: int) -> None:
    names = [chr(ord("a") + index) for index in range(count)]
    rounds = 2 * count if count % 2 else count
    turns = common.balanced_turns(names, rounds)
    assert all(sorted(turn) == names for turn in turns)
    assert all(sorted(turn[place] for turn in turns) == sorted(names * (rounds // count)) for place in range(count))
    pairs = Counter((turn[index], turn[index + 1]) for turn in turns for index in range(count - 1))
    assert set(pairs.values()) == {rounds // count} and len(pairs) == count * (count - 1)


def test_balanced_rates_measure_each_run_after_each_run_alike() -> None:
    """Over a full round of turns, counting the unmeasured run of the turn's first run before each turn: every run
    comes right after each run (itself included) once."""
    events: list[str] = []
    rates = common.median_rates(10, 4, _recording(events, "base", "a", "b", "c"), balanced=True)
    assert set(rates) == {"base", "a", "b", "c"} and all(rate > 0 for rate in rates.values())
    measured = events[4:]  # after the warm-up runs: 4 turns of an unmeasured run and the 4 runs
    assert len(measured) == 4 * 5 and all(measured[turn * 5] == measured[turn * 5 + 1] for turn in range(4))
    turns = [measured[turn * 5 : turn * 5 + 5] for turn in range(4)]
    after = Counter(pair for turn in turns for pair in pairwise(turn))
    assert after == Counter({(one, other): 1 for one in ["base", *"abc"] for other in ["base", *"abc"]})


def test_turns_keep_their_order_unless_balanced() -> None:
    events: list[str] = []
    common.median_rates(10, 2, _recording(events, "a", "b"))
    assert events == ["a", "b"] * 3
