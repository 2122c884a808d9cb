"""The project installed editable into a venv (what ``make setup`` does to ``.venv``) serves a user's script run
from outside the checkout: ``<venv>/bin/python script.py`` finds ``format("aws-kinesis")`` and Spark's Python
workers have pyarrow and the connector (issue 28 item 4).

The venv is a throwaway one under tmp_path, never the shared ``.venv``: it borrows the project venv's third-party
packages through a ``.pth`` line (see test_wheel.py for why) and gets the checkout with the Makefile's own
``pip install ... -e .`` flags, read from the Makefile (compat mode: with the default mode pyspark's lookup misses
the module and the read fails with DATA_SOURCE_NOT_FOUND). The script runs with no PYTHONPATH from a directory
outside the checkout, and asserts that ``pyspark_aws_kinesis`` came from the checkout through the editable install.
"""

from __future__ import annotations

import json
import shutil
import sys
import sysconfig
from pathlib import Path

import pytest

from localaws import LocalServer
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY
from tests.package.test_wheel import ROOT, run

APP = Path(__file__).with_name("editable_app.py")


def editable_venv(where: Path) -> Path:
    """A venv at ``where`` with this interpreter's packages borrowed and the checkout installed editable; returns
    its python."""
    run([sys.executable, "-m", "venv", "--without-pip", where], where.parent)
    python = where / "bin" / "python"
    site = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], where).stdout.strip())
    (site / "_borrowed.pth").write_text(sysconfig.get_path("purelib") + "\n")
    run([sys.executable, "-m", "pip", "--python", python, "install", *makefile_install_flags()], ROOT)
    return python


def makefile_install_flags() -> list[str]:
    """The flags of the Makefile's editable install of the project (``$(PY) -m pip install ... -e .``), so that
    this test runs what ``make setup`` runs (from the checkout, where ``.`` is the project)."""
    lines = [line.split() for line in (ROOT / "Makefile").read_text().splitlines() if line.rstrip().endswith("-e .")]
    assert len(lines) == 1, "the Makefile installs the project editable (`... -m pip install ... -e .`) once"
    assert lines[0][:4] == ["$(PY)", "-m", "pip", "install"], lines[0]
    return lines[0][4:]


@pytest.mark.slow
def test_a_users_script_outside_the_checkout_reads_a_stream(tmp_path: Path, kinesis_mock: LocalServer, mock_stream):
    python = editable_venv(tmp_path / "venv")
    stream = mock_stream()
    kinesis = kinesis_mock.client("kinesis")
    produced = [f"record-{i}" for i in range(5)]
    for i, data in enumerate(produced):
        kinesis.put_record(StreamName=stream, Data=data.encode(), PartitionKey=str(i))
    work = tmp_path / "work"
    work.mkdir()
    app = shutil.copy(APP, work / "my_job.py")
    keys = {"AWS_ACCESS_KEY_ID": DUMMY_ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": DUMMY_SECRET_KEY}
    out = run([python, app, stream, kinesis_mock.endpoint_url, work / "metadata"], work, timeout=300, **keys)
    (line,) = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    result = json.loads(line.removeprefix("RESULT "))
    assert Path(result["connector"]).resolve().is_relative_to(ROOT.resolve()), result["connector"]
    assert result["rows"] == sorted(produced)
