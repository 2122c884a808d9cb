"""The library as a user gets it: build the wheel, install it into a fresh venv outside the checkout, and read
a local stream with ``format("aws-kinesis")`` and no registration call: under spark-submit and in the
interactive ``pyspark`` shell (classic local[2]) and over Spark Connect (``remote("local[2]")``), on the newest
pyspark (.venv) and on EMR's 4.0.2 (.venv-compat).

The fresh venvs (and why they borrow the project venv's packages): tests/package/venvs.py. The Spark programs run
from a temporary working directory with no PYTHONPATH, and assert that ``pyspark_aws_kinesis`` came from the fresh
venv, so a checkout on the path cannot make them pass.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import zipfile
from pathlib import Path

import pytest

from infra import packaging
from localaws import LocalServer

from .venvs import (
    CONNECT_PORT,
    ROOT,
    VENVS,
    filled_stream_options,
    fresh_venv,
    project_python,
    pyspark_home,
    run,
    wait_until_port_free,
)

APP = Path(__file__).with_name("wheel_app.py")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return packaging.build_wheel(tmp_path_factory.mktemp("dist"))


def test_wheel_holds_the_library_and_nothing_of_the_monorepo(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        entry_points = archive.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    # Distinctive top-level names only: no `connector` or `generator` another distribution could own too.
    assert tops == {"pyspark_aws_kinesis", "kinesis_generator"}
    assert "kinesis_generator/templates/seed.json" in names and "pyspark_aws_kinesis/fetch/fanout/broker.py" in names
    assert "Name: pyspark-aws-kinesis" in metadata and "License-Expression: Apache-2.0" in metadata
    required = [line.split(": ", 1)[1] for line in metadata.splitlines() if line.startswith("Requires-Dist: ")]
    runtime = sorted(r for r in required if "extra ==" not in r)
    declared = ["boto3>=1.35.16", "botocore>=1.35.16", "pyarrow>=15.0", "aws-kinesis-agg>=1.2.3", "protobuf>=5.28.3"]
    assert runtime == sorted([*declared, "six>=1.16", "msgspec>=0.19"])
    assert not any(r.startswith("pyspark") for r in runtime), "the cluster provides pyspark: only the extra adds it"
    assert 'pyspark>=4.0.2; extra == "spark"' in required
    assert "kinesis-generator = kinesis_generator.cli:main" in entry_points


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
    assert not (ROOT / "build").exists() or not any((ROOT / "build").glob("lib*/pyspark_aws_kinesis"))


def test_the_wheel_cannot_build_without_its_sources(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    with pytest.raises(
        FileNotFoundError, match=re.escape("README.md, LICENSE, pyspark_aws_kinesis, kinesis_generator")
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
    produced = [f"{which}-{i}" for i in range(12)]
    options = filled_stream_options(kinesalite, stream, produced, work)
    app = shutil.copy(APP, work / "app.py")  # outside the checkout: its directory goes first on sys.path
    spark_home = pyspark_home(python, work)
    spark_env = {"PYSPARK_PYTHON": str(python), "PYSPARK_DRIVER_PYTHON": str(python), "SPARK_LOCAL_IP": "127.0.0.1"}
    arguments = [json.dumps(options), str(work)]
    # The interactive `pyspark` shell reads the app from stdin and runs it in its REPL, on the shell's `spark`.
    shell_line = f"import sys; sys.argv = ['app.py', 'shell', *{arguments!r}]; exec(open('app.py').read())\n"
    runs = {
        "spark-submit": (
            [spark_home / "bin" / "spark-submit", "--master", "local[2]", app, "classic", *arguments],
            None,
        ),
        "pyspark": ([spark_home / "bin" / "pyspark", "--master", "local[2]"], shell_line),
        # Over Connect the app also publishes the query's metrics to moto's CloudWatch (issue 16: the listener).
        "connect": ([python, app, "connect", *arguments, moto.endpoint_url, f"WheelTest/{which}"], None),
    }
    venv = (tmp_path / "venv").resolve()
    for mode, (command, stdin) in runs.items():
        # -i: the REPL stays interactive with a piped stdin, so the shell's startup (its `spark`) runs first.
        shell_env = {"PYSPARK_DRIVER_PYTHON_OPTS": "-i"} if stdin else {}
        if mode == "connect":
            wait_until_port_free(CONNECT_PORT)  # the other pyspark's connect run may not have let it go yet
        out = run(command, work, timeout=420, stdin=stdin, **spark_env, **shell_env)
        (line,) = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
        result = json.loads(line.removeprefix("RESULT "))
        assert Path(result["connector"]).resolve().is_relative_to(venv), (mode, result["connector"])
        assert result["batch"] == sorted(produced), (mode, result["phases"])
        assert result["stream"] == sorted(produced), mode
        assert result["shell_session"] == (mode == "pyspark"), mode
        assert result["pyspark"].startswith("4.0.") == (which == "pyspark-4.0.2"), result["pyspark"]
        assert result["published_input_rows"] == (len(produced) if mode == "connect" else None), mode
