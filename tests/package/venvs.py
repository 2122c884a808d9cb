"""Fresh virtual environments for the packaging tests: a venv outside the checkout that borrows a project venv's
third-party packages, with or without the wheel, and a way to run commands in an environment that has no path to
the checkout or to an index.

Why the fresh venv borrows the project venv's third-party packages: installing pyspark + pyarrow from an index
costs ~46 s and 660 MB per venv, too much for every CI run. So the fresh venv gets a ``.pth`` line naming the
project venv's site-packages (pyspark, pyarrow, boto3, ... but never the checkout: that venv has no path to it),
and the wheel goes in with ``pip install --no-deps --no-index``. That the wheel's own dependency declarations
hold is checked separately: ``pip install --dry-run --no-index`` of ``<wheel>[spark]`` must find every declared
requirement already satisfied (no index to fall back on) and install nothing but the wheel.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from infra import packaging
from localaws import LocalServer
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY
from tests.connector.support.source_util import wait_for

ROOT = Path(__file__).resolve().parents[2]
# The project venvs whose pyspark the fresh venvs borrow; WHEEL_TEST_VENV_NEWEST / _COMPAT override them (a
# private venv with requirements.txt while the shared ones lag behind).
VENVS = {
    "newest": Path(os.environ.get("WHEEL_TEST_VENV_NEWEST", ROOT / ".venv")),
    "pyspark-4.0.2": Path(os.environ.get("WHEEL_TEST_VENV_COMPAT", ROOT / ".venv-compat")),
}
# An environment with no way to the checkout or to an index: no PYTHONPATH, no pip config (find-links).
# SPARK_SUBMIT_OPTS: the suite's cheaper JVM options (tests/conftest.py); the borrowed pyspark's jars fit its archive.
CLEAN_ENV_KEYS = ("PATH", "HOME", "JAVA_HOME", "LANG", "TMPDIR", "SPARK_SUBMIT_OPTS")


def clean_env(**extra: str) -> dict[str, str]:
    env = {key: os.environ[key] for key in CLEAN_ENV_KEYS if key in os.environ}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1", **extra}


# Where builder.remote("local[...]") starts its Spark Connect server: the client it returns knows no other port.
CONNECT_PORT = 15002


def port_is_free(port: int) -> bool:
    """Whether 127.0.0.1:``port`` can be bound now, as Spark Connect binds it: without SO_REUSEADDR, so a closed
    connection's TIME_WAIT on the port still holds it (up to a minute)."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def wait_until_port_free(port: int, timeout_s: float = 120.0) -> None:
    """Until 127.0.0.1:``port`` can be bound: the last app's JVM may outlive its Python (pyspark does not wait
    for it) and still hold the port for a while on a busy machine."""
    wait_for(lambda: port_is_free(port), timeout_s, 0.5, f"127.0.0.1:{port} to be free")


def run(
    command: list, cwd: Path, timeout: float = 300, stdin: str | None = None, **env: str
) -> subprocess.CompletedProcess:
    """Run ``command`` in the clean environment plus ``env``; fail the test with its output if it fails."""
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


def project_python(which: str) -> Path:
    """The interpreter of a project venv (``make setup`` / ``make test-compat`` create them)."""
    python = VENVS[which] / "bin" / "python"
    if not python.exists():
        pytest.fail(f"{python} is missing: `make setup` (or `make test-compat`) creates it")
    return python


def borrowing_venv(base_python: Path, where: Path) -> Path:
    """A new venv at ``where`` that sees ``base_python``'s site-packages (through a .pth line) and nothing else:
    no checkout, no connector. Returns its interpreter."""
    run([base_python, "-m", "venv", "--without-pip", where], cwd=where.parent)
    borrowed = run([base_python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], cwd=where.parent)
    python = where / "bin" / "python"
    purelib = Path(
        run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], cwd=where).stdout.strip()
    )
    (purelib / "_borrowed_project_venv.pth").write_text(borrowed.stdout.strip() + "\n")
    return python


def fresh_venv(base_python: Path, where: Path, wheel: Path, first: Sequence[Path] = ()) -> Path:
    """A borrowing venv with ``wheel`` installed once its declared dependencies are shown to resolve against what
    is there; the wheels ``first`` (other distributions sharing the environment) go in before it."""
    python = borrowing_venv(base_python, where)
    # The declared dependencies (with the [spark] extra) are all satisfied by what is installed: no index exists.
    # base_python's pip works on the fresh venv (`--python`): the fresh venv needs no pip of its own.
    pip = [base_python, "-m", "pip", "--python", python, "install", "--no-index"]
    for other in first:
        run([*pip, "--no-deps", other], cwd=where)
    dry = run([*pip, "--dry-run", f"{wheel}[spark]"], cwd=where)
    assert f"Would install pyspark-aws-kinesis-{packaging.project_version()}\n" in dry.stdout, dry.stdout
    run([*pip, "--no-deps", wheel], cwd=where)
    return python


def pyspark_home(python: Path, cwd: Path) -> Path:
    """Where ``python``'s pyspark lives: its bin/ and sbin/ scripts and jars."""
    out = run([python, "-c", "import pyspark, os; print(os.path.dirname(pyspark.__file__))"], cwd)
    return Path(out.stdout.strip())


def filled_stream_options(kinesalite: LocalServer, stream: str, produced: list[str], work: Path) -> dict[str, str]:
    """Put ``produced`` (one record each) into ``stream`` and return the options that read it from the oldest."""
    kinesis = kinesalite.client("kinesis")
    for i, data in enumerate(produced):
        kinesis.put_record(StreamName=stream, Data=data.encode(), PartitionKey=str(i))
    return {
        "kinesis.streamName": stream,
        "kinesis.endpointUrl": kinesalite.endpoint_url,
        "kinesis.awsAccessKeyId": DUMMY_ACCESS_KEY,
        "kinesis.awsSecretKey": DUMMY_SECRET_KEY,
        "kinesis.startingPosition": "TRIM_HORIZON",
        "kinesis.metadataPath": str(work / "metadata"),
    }
