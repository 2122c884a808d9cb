"""The start-up hook ``make setup`` writes into ``.venv`` (a ``.pth`` line): a script run by the venv's python starts
Spark's Python workers on that same python unless the user set ``PYSPARK_PYTHON`` (without it Spark starts
``python3`` from PATH, which lacks the connector: DATA_SOURCE_NOT_FOUND at ``load()``). The hook is written by the
Makefile's own line (read from the Makefile, as test_editable.py reads the install line) into throwaway venvs, one
of them running a first script with no ``PYSPARK_PYTHON`` line; one test checks the project's ``.venv`` itself.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from localaws import LocalServer
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY
from tests.package.makefile_lines import recipe_line
from tests.package.test_editable import editable_venv
from tests.package.test_wheel import ROOT, run

SHOW = "import os; print(os.environ.get('PYSPARK_PYTHON')); print(os.environ.get('PYSPARK_DRIVER_PYTHON'))"

# The editable install's script without its PYSPARK_PYTHON line: the hook alone must make it work.
SETS_SPARK_PYTHON = 'os.environ.setdefault("PYSPARK_PYTHON", sys.executable)\n'
FIRST_SCRIPT = (Path(__file__).with_name("editable_app.py")).read_text().replace(SETS_SPARK_PYTHON, "")


def makefile_hook_command(python: Path) -> str:
    """The Makefile's line that writes the hook (in the ``$(VENV)/.installed`` recipe), for ``python``."""
    fill = {"$(PY)": shlex.quote(str(python))}
    return recipe_line("$(VENV)/.installed", "pyspark_python_hook.pth", "SPARK_PYTHON_HOOK", **fill)


def install_hook(python: Path) -> None:
    subprocess.run(["bash", "-c", makefile_hook_command(python)], check=True, cwd=ROOT)


def seen_by(python: Path, **env: str) -> tuple[str, str]:
    """PYSPARK_PYTHON and PYSPARK_DRIVER_PYTHON as a script run by ``python`` with only ``env`` set sees them."""
    shown = run([python, "-c", SHOW], ROOT, **env).stdout.split("\n")
    return shown[0], shown[1]


def assert_the_hook_works(python: Path) -> None:
    assert seen_by(python) == (str(python), "None")  # the workers' python set, the driver left alone
    assert seen_by(python, PYSPARK_PYTHON="/usr/bin/python3") == ("/usr/bin/python3", "None")  # the user's stays


def test_the_makefiles_hook_sets_the_workers_python_only_when_unset(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    python = venv / "bin" / "python"
    assert seen_by(python) == ("None", "None")
    install_hook(python)
    assert_the_hook_works(python)
    install_hook(python)  # make setup again: the same one line
    assert len(list(venv.glob("lib/python*/site-packages/pyspark_python_hook.pth"))) == 1


def test_the_project_venv_has_the_hook() -> None:
    python = ROOT / ".venv" / "bin" / "python"
    if not python.exists():
        pytest.skip("no .venv: `make setup` makes it")
    hooks = list((ROOT / ".venv").glob("lib/python*/site-packages/pyspark_python_hook.pth"))
    assert hooks, f"no hook in .venv: run `{makefile_hook_command(Path('.venv/bin/python'))}` (or make setup)"
    assert_the_hook_works(python)


@pytest.mark.slow
def test_a_first_script_without_pyspark_python_reads_a_stream(
    tmp_path: Path, kinesis_mock: LocalServer, mock_stream
) -> None:
    python = editable_venv(tmp_path / "venv")  # what make setup installs, then its hook
    install_hook(python)
    stream = mock_stream()
    kinesis = kinesis_mock.client("kinesis")
    produced = [f"record-{i}" for i in range(3)]
    for i, data in enumerate(produced):
        kinesis.put_record(StreamName=stream, Data=data.encode(), PartitionKey=str(i))
    work = tmp_path / "work"
    work.mkdir()
    script = work / "my_job.py"
    assert "os.environ" not in FIRST_SCRIPT  # nothing but the hook sets PYSPARK_PYTHON
    script.write_text(FIRST_SCRIPT)
    keys = {"AWS_ACCESS_KEY_ID": DUMMY_ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": DUMMY_SECRET_KEY}
    out = run([python, script, stream, kinesis_mock.endpoint_url, work / "metadata"], work, timeout=300, **keys)
    (line,) = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    assert json.loads(line.removeprefix("RESULT "))["rows"] == produced
