"""How tests are handed to xdist workers (tests/xdist_groups.py): a module's shared fixture keeps its tests on one
worker, run in a real pytest-xdist session."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SHARED_MODULE = """
import os, time, pytest

@pytest.fixture(scope="module")
def built_once():
    return os.environ["PYTEST_XDIST_WORKER"]

@pytest.mark.parametrize("n", range(6))
def test_shares(built_once, n):
    time.sleep(0.3)  # long enough that, ungrouped, idle workers would take some of them
    assert built_once == os.environ["PYTEST_XDIST_WORKER"]
"""

ALONE_MODULE = """
import pytest

@pytest.mark.parametrize("n", range(6))
def test_alone(n):
    pass

@pytest.mark.slow
def test_slow():
    pass
"""


def run_xdist(directory: Path, workers: int) -> list[tuple[str, str]]:
    """(worker, test name) of each test that passed, in the order they ended."""
    (directory / "test_shared.py").write_text(SHARED_MODULE)
    (directory / "test_alone.py").write_text(ALONE_MODULE)
    (directory / "pytest.ini").write_text("[pytest]\nmarkers = slow\n")
    command = [sys.executable, "-m", "pytest", "-p", "tests.xdist_groups", "-p", "no:cacheprovider", "-v"]
    out = subprocess.run(
        [*command, str(directory), "-n", str(workers), "--dist", "loadgroup"],
        cwd=directory,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    ran = re.findall(r"\[(gw\d)\] \[ *\d+%\] PASSED \S*::(test_\w+)", out.stdout)
    assert len(ran) == 13, out.stdout
    return ran


def test_the_tests_of_a_module_fixture_run_on_one_worker(tmp_path: Path) -> None:
    ran = run_xdist(tmp_path, workers=3)
    assert len({worker for worker, name in ran if name == "test_shares"}) == 1, ran
    assert len({worker for worker, _ in ran}) > 1, ran  # the other tests still spread


def test_the_group_goes_first_then_slow_tests(tmp_path: Path) -> None:
    names = [name for _, name in run_xdist(tmp_path, workers=1)]  # one worker: the order they were handed out
    assert names[:7] == ["test_shares"] * 6 + ["test_slow"], names
