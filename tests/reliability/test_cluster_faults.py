"""Cluster faults on ``local-cluster[2,1,1024]`` (two executor JVMs), the connector shipped as a ``--py-files``
zip as on EMR: an executor killed in the middle of a batch, and a task attempt that fails once. In both, records
keep flowing while the fault happens, the query recovers, and the parquet sink holds every record exactly once
with each key in Kinesis order.

The query runs in its own ``spark-submit`` process (``cluster_app.py``): a second SparkSession cannot live in
the pytest process. The test's own ``spark`` session reads the sink back (its ``_spark_metadata`` log lists only
committed files, so a killed task's leftovers do not count).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infra.packaging import build_pyfiles_zip
from localaws import LocalServer
from tests.connector.support.source_util import source_options
from tests.reliability.cluster_app import FAIL_TASK_ONCE, KILL_EXECUTOR
from tests.reliability.keyed_records import KeyedProducer, assert_exactly_once_in_order

APP = Path(__file__).with_name("cluster_app.py")
MASTER = "local-cluster[2,1,1024]"
CHUNK = 50  # records per send while the query runs


def connector_zip(out_dir: Path) -> Path:
    """The connector alone, zipped as EMR's ``--py-files`` gets it (``infra.packaging``)."""
    return build_pyfiles_zip(out_dir, packages=("pyspark_aws_kinesis",))


def start_app(config: dict, py_files: Path, log: Path) -> subprocess.Popen:
    """``spark-submit`` of cluster_app.py; the checkout is on nobody's path, only the zip is.

    The zip is also the driver JVM's PYTHONPATH, as YARN cluster mode (EMR's steps) gives it to the driver: in
    client mode ``--py-files`` alone does not reach the driver's streaming-source planner (measured on pyspark 4.3:
    "Failed to plan Python data source initialize source: ModuleNotFoundError: No module named 'pyspark_aws_kinesis'").
    In local-cluster the executors inherit that PYTHONPATH: they import the same zip.
    """
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["PYTHONPATH"] = str(py_files)
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    command = [
        str(Path(sys.executable).parent / "spark-submit"),
        "--master",
        MASTER,
        "--py-files",
        str(py_files),
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.sql.shuffle.partitions=2",
        # The executors' JVMs too: the suite's cheaper options (tests/conftest.py; the driver's come from the env).
        "--conf",
        f"spark.executor.extraJavaOptions={os.environ.get('SPARK_SUBMIT_OPTS', '')}",
        str(APP),
        json.dumps(config),
    ]
    with log.open("wb") as out:
        return subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=log.parent)


def committed_rows(spark, output: Path) -> list:
    if not (output / "_spark_metadata").is_dir():
        return []
    # The schema is given: before the first commit the log lists no file to infer it from.
    frame = spark.read.schema("data BINARY, shardId STRING, sequenceNumber STRING").parquet(str(output))
    return [row.asDict() for row in frame.collect()]


def run_with_fault(spark, kinesalite: LocalServer, lite_stream, tmp_path: Path, fault: str) -> tuple[list, set, list]:
    """Send records while the app runs with ``fault``; keep sending until the fault fired and then some; wait for
    the sink to hold as many rows as were sent. Returns the sink's rows, the ids sent and the fault markers."""
    stream = lite_stream(shards=2)
    producer = KeyedProducer(kinesalite, stream)
    markers, output = tmp_path / "markers", tmp_path / "out"
    markers.mkdir()
    options = source_options(kinesalite, stream, tmp_path / "metadata")
    config = {"options": options, "output": str(output), "checkpoint": str(tmp_path / "cp"), "markers": str(markers)}
    log = tmp_path / "app.log"
    app = start_app({**config, "fault": fault}, connector_zip(tmp_path / "zip"), log)
    try:

        def alive() -> None:
            assert app.poll() is None, f"the app stopped ({app.returncode}):\n{log.read_text()[-5000:]}"

        deadline = time.monotonic() + 300
        after_fault = 0
        while after_fault < 3:  # records flow before, during and after the fault
            alive()
            assert time.monotonic() < deadline, f"no fault fired:\n{log.read_text()[-5000:]}"
            producer.send(CHUNK)
            after_fault += 1 if any(markers.iterdir()) else 0
            time.sleep(2)

        def caught_up() -> bool:
            alive()
            return len(committed_rows(spark, output)) >= len(producer.sent)

        # Until the sink holds as many rows as were sent; if records are lost it never does, and after the
        # timeout the caller's exactly-once check names what is missing.
        deadline = time.monotonic() + 240
        while not caught_up() and time.monotonic() < deadline:
            time.sleep(2)
        time.sleep(2)  # a duplicate would land in a later batch: give it the chance
        return committed_rows(spark, output), producer.sent, sorted(path.name for path in markers.iterdir())
    finally:
        app.kill()
        app.wait()


@pytest.mark.slow
def test_executor_killed_mid_batch_loses_and_repeats_nothing(spark, kinesalite, lite_stream, tmp_path) -> None:
    rows, sent, markers = run_with_fault(spark, kinesalite, lite_stream, tmp_path, KILL_EXECUTOR)
    assert markers == ["killed"]
    assert_exactly_once_in_order(rows, sent)


@pytest.mark.slow
def test_task_attempt_failing_once_is_replayed_exactly_once(spark, kinesalite, lite_stream, tmp_path) -> None:
    rows, sent, markers = run_with_fault(spark, kinesalite, lite_stream, tmp_path, FAIL_TASK_ONCE)
    assert markers, "no task attempt failed"
    assert_exactly_once_in_order(rows, sent)
