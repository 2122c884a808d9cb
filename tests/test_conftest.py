"""``tests/conftest.py``: what it sets for the whole test session."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_pytest_keeps_rewritten_test_modules_under_pythondontwritebytecode(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": str(tmp_path)}
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests/bench"]
    subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True)
    kept = {path.name.split(".")[0] for path in tmp_path.rglob("*-pytest-*.pyc")}
    collected = {path.stem for path in (ROOT / "tests" / "bench").glob("test_*.py")}
    assert collected and collected <= kept
