"""How the jobs are launched: locally from a checkout, and with `spark-submit` and the EMR zip."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from infra.packaging import build_pyfiles_zip
from spark_app import common

ROOT = Path(__file__).resolve().parents[2]


def test_a_local_run_puts_the_checkout_on_the_python_workers_path(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    common.put_project_on_worker_path()
    assert os.environ["PYTHONPATH"].split(os.pathsep) == [str(ROOT), "/elsewhere"]


def test_a_job_file_runs_under_spark_submit_with_a_py_files_zip(tmp_path):
    """`spark-submit --py-files pyfiles.zip spark_app/<job>.py`, with nothing else on the path: the connector
    ships in the zip here (EMR installs it as a wheel instead and zips only the jobs: tests/package)."""
    pyfiles = build_pyfiles_zip(tmp_path, packages=("pyspark_aws_kinesis", "spark_app"))
    spark_submit = Path(sys.executable).with_name("spark-submit")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        [str(spark_submit), "--py-files", str(pyfiles), str(ROOT / "spark_app" / "country_counts.py"), "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "--checkpoint-location" in result.stdout and "--window-seconds" in result.stdout
