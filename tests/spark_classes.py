"""A class-data-sharing archive of the classes a Spark JVM loads, for the JVMs the tests start (docs/testing.md).

``python -m tests.spark_classes ARCHIVE`` (what ``make test`` runs once per venv) starts Spark with this
interpreter's pyspark through ``spark-submit``, runs a small app that loads what the tests' JVMs load (a batch and a
streaming query, through a Python data source, the path the connector takes), and has the JVM write every class it
loaded to ARCHIVE as it exits. A JVM started with ``java_options(ARCHIVE)`` maps those classes instead of loading
and verifying them from the jars: a Spark start then costs about half the CPU. The archive holds for the jars and
the JDK it was made with; a JVM with another classpath (a fresh venv's pyspark) ignores it, silently.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

# C1 only and one GC thread: a start's CPU is mostly compiling and collecting in parallel on CI's 2 cores.
BASE_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
QUIET = "-Xlog:cds=off,cds+dynamic=off"  # a JVM the archive does not fit says so on stdout otherwise
APP_TIMEOUT_S = 300  # the app takes about 30 s (90 on a loaded machine)

APP = """
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition


class Numbers(DataSource):
    @classmethod
    def name(cls):
        return "numbers"

    def schema(self):
        return "n long"

    def reader(self, schema):
        return NumbersReader()

    def streamReader(self, schema):
        return NumbersStream()


class NumbersReader(DataSourceReader):
    def read(self, partition):
        yield from ((n,) for n in range(100))


class NumbersStream(DataSourceStreamReader):
    def initialOffset(self):
        return {"n": 0}

    def latestOffset(self):
        return {"n": 100}

    def partitions(self, start, end):
        return [InputPartition(0)]

    def read(self, partition):
        yield from ((n,) for n in range(100))


spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
spark.dataSource.register(Numbers)
spark.range(100_000).selectExpr("id % 7 AS k").groupBy("k").count().collect()
spark.read.format("numbers").load().groupBy().sum("n").collect()
query = spark.readStream.format("numbers").load().writeStream.format("memory").queryName("numbers").start()
query.processAllAvailable()
query.stop()
spark.stop()
"""


def java_options(archive: Path) -> str:
    """The Java options of the tests' Spark JVMs: ``BASE_OPTIONS``, and the archive when there is one."""
    return f"{BASE_OPTIONS} -XX:SharedArchiveFile={archive} {QUIET}" if archive.is_file() else BASE_OPTIONS


def venv_archive() -> Path:
    """Where ``make test`` puts the archive of this interpreter's venv."""
    return Path(sys.prefix) / "spark-classes.jsa"


def submit_env(**more: str) -> dict[str, str]:
    """The environment ``spark-submit`` of this venv needs: its scripts find Spark with ``python3`` from PATH."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return {**os.environ, "PATH": path, "PYSPARK_PYTHON": sys.executable, **more}


def dump(archive: Path, attempts: int = 2) -> None:
    """Run the app under ``spark-submit`` (the JVM is its process: it has written the archive when it returns).

    A second try after a failure: on a loaded machine Spark's fixed 10 s wait for its Python worker to connect
    back can run out (it did once beside the other venv's archive and the compiles), and the suite needs none of
    the app's results, only its classes."""
    partial = archive.resolve().with_suffix(".partial")
    for attempt in range(1, attempts + 1):
        done = _submit_app(partial)
        if done.returncode == 0:
            partial.replace(archive)
            return
        failed = f"spark-submit of the archive's app failed ({done.returncode}):\n{done.stderr[-4000:]}"
        if attempt == attempts:
            raise SystemExit(failed)
        print(f"{failed}\ntrying once more", file=sys.stderr)


def _submit_app(partial: Path) -> subprocess.CompletedProcess[str]:
    """The app's run; one that outlasts ``APP_TIMEOUT_S`` (a hung query) counts as failed, with what it printed."""
    submit = Path(sys.executable).with_name("spark-submit")
    with tempfile.TemporaryDirectory() as work:
        app = Path(work) / "app.py"
        app.write_text(APP)
        env = submit_env(
            SPARK_LOCAL_IP="127.0.0.1", SPARK_SUBMIT_OPTS=f"{BASE_OPTIONS} -XX:ArchiveClassesAtExit={partial} {QUIET}"
        )
        command = [str(submit), "--master", "local[2]", str(app)]
        try:
            return subprocess.run(command, env=env, cwd=work, capture_output=True, text=True, timeout=APP_TIMEOUT_S)
        except subprocess.TimeoutExpired as hung:
            printed = hung.stderr.decode(errors="replace") if isinstance(hung.stderr, bytes) else hung.stderr or ""
            return subprocess.CompletedProcess(command, -1, "", f"{printed}\ntimed out after {APP_TIMEOUT_S} s")


if __name__ == "__main__":
    dump(Path(sys.argv[1]) if len(sys.argv) > 1 else venv_archive())
