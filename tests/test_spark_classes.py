"""The archive of Spark's classes the tests' JVMs map (tests/spark_classes.py): it fits this venv's Spark JVM, and
a JVM it does not fit runs without it, and says nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import spark_classes


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The venv's archive (``make test`` makes it), or one made here when the venv has none."""
    made = spark_classes.venv_archive()
    if not made.is_file():
        made = tmp_path_factory.mktemp("classes") / "spark-classes.jsa"
        spark_classes.dump(made)
    return made


def test_spark_jvm_maps_the_archive(archive: Path) -> None:
    # -Xshare:on: a JVM that cannot map the archive (another classpath or JDK) fails instead of loading the jars.
    options = spark_classes.java_options(archive) + " -Xshare:on"
    submit = Path(sys.executable).with_name("spark-submit")
    out = subprocess.run(
        [str(submit), "--version"],
        env=spark_classes.submit_env(SPARK_SUBMIT_OPTS=options),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "version" in out.stdout + out.stderr


def test_a_jvm_of_another_classpath_ignores_it_silently(archive: Path, tmp_path: Path) -> None:
    (tmp_path / "Hello.java").write_text(
        'class Hello { public static void main(String[] a) { System.out.println("hi"); } }'
    )
    out = subprocess.run(
        ["java", *spark_classes.java_options(archive).split(), "-cp", str(tmp_path), str(tmp_path / "Hello.java")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (out.returncode, out.stdout, out.stderr) == (0, "hi\n", "")


def test_the_options_name_the_archive_only_when_there_is_one(archive: Path) -> None:
    assert f"-XX:SharedArchiveFile={archive}" in spark_classes.java_options(archive).split()
    assert spark_classes.java_options(archive.with_name("none.jsa")) == spark_classes.BASE_OPTIONS


def test_a_failed_app_is_submitted_once_more(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys) -> None:
    """The app's Python worker timed out once on a loaded machine: the second try makes the archive."""
    answers = [subprocess.CompletedProcess([], 1, "", "Timed out while waiting for the Python worker"), None]

    def submit(partial: Path) -> subprocess.CompletedProcess[str]:
        answer = answers.pop(0)
        if answer is not None:
            return answer
        partial.write_bytes(b"classes")
        return subprocess.CompletedProcess([], 0, "", "")

    monkeypatch.setattr(spark_classes, "_submit_app", submit)
    spark_classes.dump(tmp_path / "a.jsa")
    assert (tmp_path / "a.jsa").read_bytes() == b"classes" and answers == []
    assert "trying once more" in capsys.readouterr().err


def test_two_failures_stop_the_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    failed = subprocess.CompletedProcess([], 1, "", "boom")
    monkeypatch.setattr(spark_classes, "_submit_app", lambda partial: failed)
    with pytest.raises(SystemExit, match="failed \\(1\\):\nboom"):
        spark_classes.dump(tmp_path / "a.jsa")
    assert not (tmp_path / "a.jsa").exists()


def test_a_hung_app_counts_as_failed_with_what_it_printed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def hang(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        raise subprocess.TimeoutExpired(command, kwargs["timeout"], stderr=b"waiting for the Python worker")

    monkeypatch.setattr(spark_classes.subprocess, "run", hang)
    done = spark_classes._submit_app(tmp_path / "a.partial")
    assert done.returncode != 0
    assert done.stderr.endswith(f"waiting for the Python worker\ntimed out after {spark_classes.APP_TIMEOUT_S} s")
