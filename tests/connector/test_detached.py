"""``detached.spawn_detached``: helper processes that outlive the process group that starts them.

What it promises (the module's docstrings): ``python -m <module> <args>`` with this interpreter, in a session of its
own (Spark kills a Python worker's whole process group), with stdout/stderr that are not the starter's (Spark may
wait for those to end), stdin from /dev/null unless given, and the checkout's ``pyspark_aws_kinesis`` importable
(its directory first on PYTHONPATH, the starter's PYTHONPATH kept after it). Real, short subprocesses.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from pyspark_aws_kinesis.detached import spawn_detached

# The checkout's root, which holds the link pyspark_aws_kinesis -> connector/: the directory a helper needs on its path.
PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])

# The helper the tests start: writes what it sees of itself to the file named by its first argument, then waits for
# the file named by its second (if any, and not empty) to appear, at most 10 s.
HELPER = textwrap.dedent(
    """
    import json, os, sys, time

    def fd_target(fd):
        return os.readlink(f"/proc/self/fd/{fd}")

    report, release = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else None)
    seen = {
        "pid": os.getpid(),
        "sid": os.getsid(0),
        "pgid": os.getpgid(0),
        "executable": sys.executable,
        "argv": sys.argv[1:],
        "pythonpath": os.environ.get("PYTHONPATH", ""),
        "stdout": fd_target(1),
        "stderr": fd_target(2),
        "stdin": sys.stdin.readline(),
    }
    with open(report + ".tmp", "w") as out:
        json.dump(seen, out)
    os.replace(report + ".tmp", report)
    deadline = time.monotonic() + 10
    while release and not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.01)
    """
)


@pytest.fixture
def helper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The helper module's name, importable from the test's working directory (the child's too)."""
    (tmp_path / "detached_helper.py").write_text(HELPER)
    monkeypatch.chdir(tmp_path)
    return "detached_helper"


def wait_for_report(path: Path, timeout_s: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"the helper wrote no {path}"
        time.sleep(0.01)
    return json.loads(path.read_text())


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_helper_runs_as_a_module_with_its_arguments_in_a_session_of_its_own(helper: str, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    process = spawn_detached(helper, str(report), "", "--flag", "value with spaces")  # "": no release file to wait for
    assert process.wait(timeout=10) == 0
    seen = wait_for_report(report)
    assert seen["pid"] == process.pid
    assert seen["argv"] == [str(report), "", "--flag", "value with spaces"]
    assert seen["executable"] == sys.executable  # this interpreter (the job's venv), not whatever `python` is
    assert seen["sid"] == seen["pid"] and seen["pgid"] == seen["pid"]  # it leads a session and a group of its own
    assert seen["sid"] != os.getsid(0) and seen["pgid"] != os.getpgid(0)


def test_the_helpers_output_is_not_the_starters(helper: str, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    spawn_detached(helper, str(report)).wait(timeout=10)
    seen = wait_for_report(report)
    assert (seen["stdout"], seen["stderr"]) == ("/dev/null", "/dev/null")
    assert seen["stdin"] == ""  # stdin is /dev/null unless given


def test_stdin_can_be_a_pipe_from_the_starter(helper: str, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    process = spawn_detached(helper, str(report), stdin=subprocess.PIPE)
    assert process.stdin is not None
    process.stdin.write(b"settings for the helper\n")
    process.stdin.close()
    process.wait(timeout=10)
    assert wait_for_report(report)["stdin"] == "settings for the helper\n"


def test_the_checkout_comes_first_on_the_helpers_path_and_the_starters_path_is_kept(
    helper: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = tmp_path / "report.json"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/opt/extra-a", "/opt/extra-b"]))
    spawn_detached(helper, str(report)).wait(timeout=10)
    path = wait_for_report(report)["pythonpath"].split(os.pathsep)
    assert path == [PACKAGE_PARENT, "/opt/extra-a", "/opt/extra-b"]


def test_without_a_pythonpath_the_helper_gets_the_checkout_alone(
    helper: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = tmp_path / "report.json"
    monkeypatch.delenv("PYTHONPATH", raising=False)
    spawn_detached(helper, str(report)).wait(timeout=10)
    assert wait_for_report(report)["pythonpath"] == PACKAGE_PARENT


def test_a_connector_that_is_not_installed_is_importable_in_the_helper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As with a connector shipped with --py-files: run by the interpreter under this venv, which has no
    pyspark_aws_kinesis installed, ``python -m pyspark_aws_kinesis.detached`` still starts (and exits 0)."""
    bare = getattr(sys, "_base_executable", None)
    if not bare or sys.prefix == sys.base_prefix:
        pytest.skip("not in a venv: no interpreter without the connector installed")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    without = subprocess.run([bare, "-c", "import pyspark_aws_kinesis"], capture_output=True, check=False)
    if without.returncode == 0:
        pytest.skip(f"{bare} has the connector installed")
    monkeypatch.setattr(sys, "executable", bare)
    process = spawn_detached("pyspark_aws_kinesis.detached")  # imports the package and the module, then exits
    assert process.wait(timeout=20) == 0


def test_the_helper_survives_the_death_of_the_starters_process_group(helper: str, tmp_path: Path) -> None:
    """As when Spark kills a Python worker: the starter runs in a group of its own, spawns the helper and is killed
    with its whole group; the helper lives on."""
    report, release = tmp_path / "report.json", tmp_path / "release"
    starter = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from pyspark_aws_kinesis.detached import spawn_detached\n"
            "spawn_detached(sys.argv[1], sys.argv[2], sys.argv[3])\n"
            "time.sleep(30)\n",
            helper,
            str(report),
            str(release),
        ],
        start_new_session=True,  # the worker's own group, which Spark kills whole
        # The starter imports the connector from the checkout (pyspark 4.0.2's venv does not install it).
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [PACKAGE_PARENT, os.environ.get("PYTHONPATH")]))},
    )
    helper_pid = None
    try:
        helper_pid = wait_for_report(report)["pid"]
        os.killpg(starter.pid, signal.SIGKILL)
        assert starter.wait(timeout=10) == -signal.SIGKILL
        time.sleep(0.1)
        assert alive(helper_pid), "the helper died with its starter's process group"
    finally:
        release.touch()  # the helper exits by itself
        if starter.poll() is None:
            starter.kill()
            starter.wait(timeout=10)
    deadline = time.monotonic() + 10
    while alive(helper_pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not alive(helper_pid)
