"""The library as a user gets it: build the wheel, install it into a fresh venv outside the checkout, and read
a local stream with ``format("aws-kinesis")`` and no registration call: under spark-submit and in the
interactive ``pyspark`` shell (classic local[2]) and over Spark Connect (``remote("local[2]")``), on the newest
pyspark (.venv) and on EMR's 4.0.2 (.venv-compat).

Why the fresh venv borrows the project venv's third-party packages: installing pyspark + pyarrow from an index
costs ~46 s and 660 MB per venv, too much for every CI run. So the fresh venv gets a ``.pth`` line naming the
project venv's site-packages (pyspark, pyarrow, boto3, ... but never the checkout: that venv has no path to it),
and the wheel goes in with ``pip install --no-deps --no-index``. That the wheel's own dependency declarations
hold is checked separately: ``pip install --dry-run --no-index`` of ``<wheel>[spark]`` must find every declared
requirement already satisfied (no index to fall back on) and install nothing but the wheel. The Spark programs
run from a temporary working directory with no PYTHONPATH, and assert that ``connector`` came from the fresh
venv, so a checkout on the path cannot make them pass.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from infra import packaging
from localaws import LocalServer
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY

ROOT = Path(__file__).resolve().parents[2]
APP = Path(__file__).with_name("wheel_app.py")
# The project venvs whose pyspark the fresh venvs borrow; WHEEL_TEST_VENV_NEWEST / _COMPAT override them (a
# private venv with requirements.txt while the shared ones lag behind).
VENVS = {
    "newest": Path(os.environ.get("WHEEL_TEST_VENV_NEWEST", ROOT / ".venv")),
    "pyspark-4.0.2": Path(os.environ.get("WHEEL_TEST_VENV_COMPAT", ROOT / ".venv-compat")),
}
# An environment with no way to the checkout or to an index: no PYTHONPATH, no pip config (find-links).
CLEAN_ENV_KEYS = ("PATH", "HOME", "JAVA_HOME", "LANG", "TMPDIR")


def clean_env(**extra: str) -> dict[str, str]:
    env = {key: os.environ[key] for key in CLEAN_ENV_KEYS if key in os.environ}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1", **extra}


def run(
    command: list, cwd: Path, timeout: float = 300, stdin: str | None = None, **env: str
) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=clean_env(**env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, f"{command}\nstdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-5000:]}"
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return packaging.build_wheel(tmp_path_factory.mktemp("dist"))


def project_python(which: str) -> Path:
    """The interpreter of a project venv (``make setup`` / ``make test-compat`` create them)."""
    python = VENVS[which] / "bin" / "python"
    if not python.exists():
        pytest.fail(f"{python} is missing: `make setup` (or `make test-compat`) creates it")
    return python


def fresh_venv(base_python: Path, where: Path, wheel: Path) -> Path:
    """A new venv borrowing ``base_python``'s site-packages through a .pth line, with ``wheel`` installed once its
    declared dependencies are shown to resolve against what is there."""
    run([base_python, "-m", "venv", "--without-pip", where], cwd=where.parent)
    borrowed = run([base_python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], cwd=where.parent)
    python = where / "bin" / "python"
    purelib = Path(
        run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], cwd=where).stdout.strip()
    )
    (purelib / "_borrowed_project_venv.pth").write_text(borrowed.stdout.strip() + "\n")
    # The declared dependencies (with the [spark] extra) are all satisfied by what is installed: no index exists.
    # base_python's pip works on the fresh venv (`--python`): the fresh venv needs no pip of its own.
    pip = [base_python, "-m", "pip", "--python", python, "install", "--no-index"]
    dry = run([*pip, "--dry-run", f"{wheel}[spark]"], cwd=where)
    assert "Would install pyspark-aws-kinesis-0.1.0\n" in dry.stdout, dry.stdout
    run([*pip, "--no-deps", wheel], cwd=where)
    return python


def test_wheel_holds_the_library_and_nothing_of_the_monorepo(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        entry_points = archive.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"connector", "generator", "pyspark_aws_kinesis.py"}
    assert "generator/templates/seed.json" in names and "connector/fetch/polling.py" in names
    assert "Name: pyspark-aws-kinesis" in metadata and "License-Expression: Apache-2.0" in metadata
    required = [line.split(": ", 1)[1] for line in metadata.splitlines() if line.startswith("Requires-Dist: ")]
    runtime = sorted(r for r in required if "extra ==" not in r)
    assert runtime == sorted(
        ["boto3>=1.34", "botocore>=1.34", "pyarrow>=15.0", "aws-kinesis-agg>=1.2.3", "protobuf>=4.25", "six>=1.16"]
    )
    assert not any(r.startswith("pyspark") for r in runtime), "the cluster provides pyspark: only the extra adds it"
    assert 'pyspark>=4.0.2; extra == "spark"' in required
    assert "kinesis-generator = generator.cli:main" in entry_points


def test_the_wheel_builds_offline_and_byte_identical(wheel: Path, tmp_path: Path) -> None:
    # A proxy that refuses every connection: any index access would fail the build.
    offline = {"http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9", "PIP_CONFIG_FILE": os.devnull}
    old = {key: os.environ.get(key) for key in offline}
    os.environ.update(offline)
    try:
        again = packaging.build_wheel(tmp_path / "again")
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    assert again.name == wheel.name and again.read_bytes() == wheel.read_bytes()
    assert not (ROOT / "build").exists() or not any((ROOT / "build").glob("lib*/pyspark_aws_kinesis.py"))


def test_the_wheel_cannot_build_without_its_sources(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    with pytest.raises(
        FileNotFoundError, match=re.escape("README.md, LICENSE, pyspark_aws_kinesis.py, connector, generator")
    ):
        packaging.build_wheel(tmp_path / "out", root=tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("which", list(VENVS))
def test_installed_wheel_reads_without_registering_in_pyspark_spark_submit_and_over_connect(
    which: str, wheel: Path, kinesalite: LocalServer, moto: LocalServer, lite_stream, tmp_path: Path
) -> None:
    base = project_python(which)
    work = tmp_path / "work"
    work.mkdir()
    python = fresh_venv(base, tmp_path / "venv", wheel)

    # The console script from [project.scripts] (its extra's faker and rich come from the borrowed packages).
    usage = run([python.with_name("kinesis-generator"), "--help"], work)
    assert "--stream" in usage.stdout and "--rate" in usage.stdout

    stream = lite_stream(shards=2)
    kinesis = kinesalite.client("kinesis")
    produced = [f"{which}-{i}" for i in range(12)]
    for i, data in enumerate(produced):
        kinesis.put_record(StreamName=stream, Data=data.encode(), PartitionKey=str(i))
    options = {
        "kinesis.streamName": stream,
        "kinesis.endpointUrl": kinesalite.endpoint_url,
        "kinesis.awsAccessKeyId": DUMMY_ACCESS_KEY,
        "kinesis.awsSecretKey": DUMMY_SECRET_KEY,
        "kinesis.startingPosition": "TRIM_HORIZON",
        "kinesis.metadataPath": str(work / "metadata"),
    }
    app = shutil.copy(APP, work / "app.py")  # outside the checkout: its directory goes first on sys.path
    pyspark_home = Path(
        run([python, "-c", "import pyspark, os; print(os.path.dirname(pyspark.__file__))"], work).stdout.strip()
    )
    spark_env = {"PYSPARK_PYTHON": str(python), "PYSPARK_DRIVER_PYTHON": str(python), "SPARK_LOCAL_IP": "127.0.0.1"}
    arguments = [json.dumps(options), str(work)]
    # The interactive `pyspark` shell reads the app from stdin and runs it in its REPL, on the shell's `spark`.
    shell_line = f"import sys; sys.argv = ['app.py', 'shell', *{arguments!r}]; exec(open('app.py').read())\n"
    runs = {
        "spark-submit": (
            [pyspark_home / "bin" / "spark-submit", "--master", "local[2]", app, "classic", *arguments],
            None,
        ),
        "pyspark": ([pyspark_home / "bin" / "pyspark", "--master", "local[2]"], shell_line),
        # Over Connect the app also publishes the query's metrics to moto's CloudWatch (issue 16: the listener).
        "connect": ([python, app, "connect", *arguments, moto.endpoint_url, f"WheelTest/{which}"], None),
    }
    venv = (tmp_path / "venv").resolve()
    for mode, (command, stdin) in runs.items():
        # -i: the REPL stays interactive with a piped stdin, so the shell's startup (its `spark`) runs first.
        shell_env = {"PYSPARK_DRIVER_PYTHON_OPTS": "-i"} if stdin else {}
        out = run(command, work, timeout=420, stdin=stdin, **spark_env, **shell_env)
        (line,) = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
        result = json.loads(line.removeprefix("RESULT "))
        assert Path(result["connector"]).resolve().is_relative_to(venv), (mode, result["connector"])
        assert result["batch"] == sorted(produced), (mode, result["phases"])
        assert result["stream"] == sorted(produced), mode
        assert result["shell_session"] == (mode == "pyspark"), mode
        assert result["pyspark"].startswith("4.0.") == (which == "pyspark-4.0.2"), result["pyspark"]
        assert result["published_input_rows"] == (len(produced) if mode == "connect" else None), mode
