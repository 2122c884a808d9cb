"""The soak driver's kill at a chosen phase (``bench.soak_driver.KillWhenWritten``), with a stand-in for Spark's
status tracker."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench.soak_driver import KillWhenWritten


class Tracker:
    """Answers ``getActiveStageIds`` / ``getStageInfo`` from a script of polls: {stage: (tasks, completed)}."""

    def __init__(self, polls: list[dict[int, tuple[int, int]]]) -> None:
        self.polls: Iterator[dict[int, tuple[int, int]]] = iter(polls)
        self.now: dict[int, tuple[int, int]] = {}

    def getActiveStageIds(self) -> list[int]:
        self.now = next(self.polls)
        return list(self.now)

    def getStageInfo(self, stage: int) -> SimpleNamespace:
        tasks, completed = self.now[stage]
        return SimpleNamespace(numTasks=tasks, numCompletedTasks=completed)


def _killer(tmp_path: Path, polls: list[dict[int, tuple[int, int]]], monkeypatch: pytest.MonkeyPatch):
    spark = SimpleNamespace(sparkContext=SimpleNamespace(statusTracker=lambda: Tracker(polls)))
    killer = KillWhenWritten(spark, tmp_path, incarnation=3)
    monkeypatch.setattr(KillWhenWritten, "POLL_S", 0.0)
    signals: list[tuple[int, int]] = []

    def killpg(group: int, signal: int) -> None:
        signals.append((group, signal))

    monkeypatch.setattr("bench.soak_driver.os.killpg", killpg)
    return killer, signals


def test_the_kill_comes_at_the_first_finished_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "kill-when-written").touch()
    killer, signals = _killer(tmp_path, [{}, {4: (2, 0)}, {4: (2, 0)}, {4: (2, 1)}], monkeypatch)
    killer.run()
    assert len(signals) == 1
    met = json.loads((tmp_path / "kill-3.json").read_text())
    assert (met["stage"], met["finished_tasks"], met["tasks"]) == (4, 1, 2)


def test_a_stage_that_ended_between_two_polls_counts_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "kill-when-written").touch()
    killer, signals = _killer(tmp_path, [{7: (1, 0)}, {}], monkeypatch)
    killer.run()
    assert len(signals) == 1
    met = json.loads((tmp_path / "kill-3.json").read_text())
    assert (met["stage"], met["finished_tasks"], met["tasks"]) == (7, 1, 1)


def test_the_drivers_first_stage_is_not_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "kill-when-written").touch()
    killer, signals = _killer(tmp_path, [{0: (2, 1)}, {}, {1: (2, 0)}, {1: (2, 2)}], monkeypatch)
    killer.run()
    assert len(signals) == 1
    assert json.loads((tmp_path / "kill-3.json").read_text())["stage"] == 1


def test_nothing_is_killed_until_the_harness_arms_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    killer, signals = _killer(tmp_path, [{4: (1, 1)}], monkeypatch)
    killer.start()
    killer.join(timeout=0.3)
    assert killer.is_alive() and not signals
    (tmp_path / "kill-when-written").touch()
    killer.join(timeout=5)
    assert signals and (tmp_path / "kill-3.json").exists()
