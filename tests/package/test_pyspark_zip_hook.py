"""The start-up hook ``make setup`` writes into each venv (a ``.pth`` line) that drops the installed pyspark's own
``pyspark.zip`` from the path Spark gives its Python processes: imported from the zip, pyspark compiled again in
every runner, daemon and worker (docs/testing.md, "The pyspark.zip"). The hook is written by the Makefile's own
line into a throwaway venv; other tests check the project's venvs and a Python worker of the session's Spark.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.package.makefile_lines import recipe_line

ROOT = Path(__file__).resolve().parents[2]

PROJECT_VENVS = (ROOT / ".venv", ROOT / ".venv-compat")


def makefile_hook_command(venv: Path) -> str:
    """The Makefile's line that writes the hook (the ``%/.pyspark-zip-hook`` recipe), for ``venv``."""
    return recipe_line("%/.pyspark-zip-hook", "pyspark_zip_hook.pth", "PYSPARK_ZIP_HOOK", **{"$*": str(venv)})


def purelib(venv: Path) -> Path:
    code = "import sysconfig; print(sysconfig.get_path('purelib'))"
    out = subprocess.run([venv / "bin" / "python", "-c", code], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def path_seen(venv: Path, pythonpath: list[Path], code: str = "import sys; print(*sys.path, sep='\\n')") -> list[str]:
    """What ``code`` prints, run by the venv's python with ``PYTHONPATH`` as Spark sets it for its workers."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, pythonpath))}
    out = subprocess.run([venv / "bin" / "python", "-c", code], check=True, capture_output=True, text=True, env=env)
    return out.stdout.splitlines()


def spark_pythonpath(venv: Path) -> list[Path]:
    """The zips a Spark of this venv's pyspark puts first on its Python processes' path."""
    lib = purelib(venv) / "pyspark" / "python" / "lib"
    return [lib / "pyspark.zip", *lib.glob("py4j-*-src.zip")]


def test_the_makefiles_hook_drops_the_installed_pysparks_zip_and_nothing_else(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    ours = purelib(venv) / "pyspark" / "python" / "lib" / "pyspark.zip"
    ours.parent.mkdir(parents=True)
    other = tmp_path / "spark-home" / "python" / "lib" / "pyspark.zip"  # a Spark of the user's own SPARK_HOME
    other.parent.mkdir(parents=True)
    for path in (ours, other):
        zipfile.ZipFile(path, "w").close()
    (tmp_path / "link").symlink_to(venv)  # the same zip by another name
    by_link = tmp_path / "link" / ours.relative_to(venv)
    pythonpath = [ours, other, by_link]
    assert path_seen(venv, pythonpath)[1:4] == list(map(str, pythonpath))  # before the hook: all three, first

    subprocess.run(["bash", "-c", makefile_hook_command(venv)], check=True, cwd=ROOT)
    seen = path_seen(venv, pythonpath)
    assert str(other) in seen
    assert str(ours) not in seen and str(by_link) not in seen
    subprocess.run(["bash", "-c", makefile_hook_command(venv)], check=True, cwd=ROOT)  # make setup again: one line
    assert len(list(venv.glob("lib/python*/site-packages/pyspark_zip_hook.pth"))) == 1


@pytest.mark.parametrize("venv", PROJECT_VENVS, ids=lambda venv: venv.name)
def test_the_project_venvs_python_imports_pyspark_from_the_venv_under_sparks_path(venv: Path) -> None:
    if not (venv / "bin" / "python").exists():
        pytest.skip(f"no {venv.name}: `make test` makes it")
    pythonpath = spark_pythonpath(venv)
    assert pythonpath[0].is_file(), "pyspark ships its zip: the hook has something to drop"
    (where,) = path_seen(venv, pythonpath, "import pyspark; print(pyspark.__file__)")
    assert where == str(purelib(venv) / "pyspark" / "__init__.py"), f"run `{makefile_hook_command(venv)}`"


def test_a_python_worker_of_the_sessions_spark_imports_pyspark_from_the_venv(spark) -> None:
    # A task's worker is forked by the daemon Spark started with its zip first on PYTHONPATH.
    (where,) = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("pyspark").__file__).collect()
    assert where == str(purelib(Path(sys.prefix)) / "pyspark" / "__init__.py")
