"""``bench.common.median_rates``: runs take turns, and with ``collect`` each starts after a full garbage collection
(outside its time), so no run pays for the garbage of the run before it."""

from __future__ import annotations

import gc

import pytest

from bench import common


def test_each_run_starts_after_a_garbage_collection_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    monkeypatch.setattr(common.gc, "collect", lambda *args: events.append("collect") or 0)
    runs = {name: (lambda name=name: events.append(name) or sum(range(10_000))) for name in ("a", "b")}
    rates = common.median_rates(10, 2, runs, collect=True)
    assert set(rates) == {"a", "b"}
    assert events == ["a", "b", *(["collect", "a", "collect", "b"] * 2)]  # the warm-up runs collect nothing


def test_without_collect_no_run_is_preceded_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(common.gc, "collect", lambda *args: calls.append(1) or 0)
    common.median_rates(10, 2, {"a": lambda: sum(range(10_000))})
    assert calls == [] and gc.isenabled()
