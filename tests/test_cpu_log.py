"""The suite's per-test CPU log (tests/cpu_log.py): a child's CPU is counted, live or reaped."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests import cpu_log

BURN = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass\n"


def test_a_live_child_and_a_reaped_one_both_count() -> None:
    before = cpu_log.tree_cpu_s(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", BURN + "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        while cpu_log.tree_cpu_s(child.pid) < 0.3:
            pass  # the child burns its 0.4 s; this loop's own CPU counts too, so only a lower bound is checked
        assert cpu_log.tree_cpu_s(os.getpid()) - before >= 0.3
    finally:
        child.communicate(b"")
    subprocess.run([sys.executable, "-c", BURN], check=True)
    assert cpu_log.tree_cpu_s(os.getpid()) - before >= 0.7  # both, once reaped


def test_lines_are_summed_by_file_most_cpu_first() -> None:
    lines = [
        {"test": "t/test_b.py::test_x", "cpu_s": 1.0, "wall_s": 5.0},
        {"test": "t/test_a.py::test_y", "cpu_s": 2.0, "wall_s": 1.0},
        {"test": "t/test_a.py::test_z[1]", "cpu_s": 1.0, "wall_s": 3.0},
    ]
    rows = cpu_log.by_file(lines)
    assert [name for name, _cpu, _wall in rows] == ["t/test_a.py", "t/test_b.py"]
    assert rows[0][1:] == (3.0, 4.0)


def test_the_hook_writes_a_line_per_test(tmp_path) -> None:
    log = tmp_path / "cpu.jsonl"
    (tmp_path / "test_two.py").write_text("def test_one():\n    pass\n\ndef test_two():\n    pass\n")
    env = {**os.environ, cpu_log.ENV: str(log), "PYTHONPATH": os.getcwd()}
    env.pop("PYTEST_XDIST_WORKER", None)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "tests.cpu_log", "-p", "no:cacheprovider", "test_two.py"]
    subprocess.run(command, cwd=tmp_path, env=env, check=True, capture_output=True)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["test"] for line in lines] == ["test_two.py::test_one", "test_two.py::test_two"]
    assert all(line["cpu_s"] >= 0 and line["wall_s"] >= 0 for line in lines)
