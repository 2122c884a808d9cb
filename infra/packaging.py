"""What the EMR cluster runs, built from the working tree without CDK: the library's wheel (the connector), the
bootstrap script that installs it with its locked dependencies (infra.wheelhouse), the `--py-files` zip of the
jobs' own code, and a job's `spark-submit` line.

Used at synth time by `infra.emr` (assets and the stack's step) and at run time by `infra.submit_step`, so
the stack and the submitter always submit the same command. `build_wheel` is also what the wheel tests install.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

from infra import layout
from infra.wheelhouse import REQUIREMENTS_NAME

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# Only the jobs ship as --py-files: the connector comes from the wheel the bootstrap action installs.
PY_PACKAGES = ("spark_app",)
# What `pip wheel` needs from the checkout to build the library (pyproject.toml says what goes into the wheel).
# The packages under their import names: links in the checkout, copied as real folders.
WHEEL_SOURCES = ("pyproject.toml", "README.md", "LICENSE", "pyspark_aws_kinesis", "kinesis_generator")
PYFILES_ZIP = "pyfiles.zip"
BOOTSTRAP_SCRIPT = "install-python-deps.sh"
# A fixed timestamp makes the zip byte-identical for identical sources, so the CDK asset hash (and thus the
# deployed S3 object) changes only when the code does.
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def project_version(root: Path = PROJECT_ROOT) -> str:
    """The distribution's version: written once, in pyproject.toml (the CHANGELOG's newest entry names it too)."""
    with (root / "pyproject.toml").open("rb") as handle:
        return tomllib.load(handle)["project"]["version"]


def job_entry(job: str, root: Path = PROJECT_ROOT) -> Path:
    """The entry file of a sample job (`spark_app/<job>.py`), which spark-submit needs as a plain file."""
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", job):
        raise ValueError(f"job {job!r}: must be a module name under spark_app/ such as country_counts")
    return root / "spark_app" / f"{job}.py"


def build_pyfiles_zip(out_dir: Path, root: Path = PROJECT_ROOT, packages: tuple[str, ...] = PY_PACKAGES) -> Path:
    """Zip the packages that exist under `root` (each at the zip root, no caches) into `out_dir/pyfiles.zip`.

    By default only `spark_app`: a `pyspark_aws_kinesis/` in the zip would shadow the installed wheel on the cluster.
    """
    present = [name for name in packages if (root / name).is_dir()]
    if not present:
        raise FileNotFoundError(f"none of the packages {', '.join(packages)} exist under {root}")
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / PYFILES_ZIP
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name in present:
            for path in sorted((root / name).rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                    info = zipfile.ZipInfo(path.relative_to(root).as_posix(), date_time=_ZIP_DATE)
                    info.external_attr = 0o644 << 16
                    archive.writestr(info, path.read_bytes(), compress_type=zipfile.ZIP_DEFLATED)
    return target


def stage_sources(root: Path, dest: Path) -> Path:
    """Copy what the distribution is built from (`WHEEL_SOURCES`) from `root` to `dest`, without caches."""
    missing = [name for name in WHEEL_SOURCES if not (root / name).exists()]
    if missing:
        raise FileNotFoundError(f"cannot build the wheel: {', '.join(missing)} missing under {root}")
    dest.mkdir(parents=True, exist_ok=True)
    for name in WHEEL_SOURCES:
        if (root / name).is_dir():
            shutil.copytree(root / name, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(root / name, dest / name)
    return dest


def build_release(out_dir: Path, root: Path = PROJECT_ROOT, python: str = sys.executable) -> tuple[Path, Path]:
    """Build what a release publishes, the sdist and the wheel built from it, with `python -m build` (offline:
    `--no-isolation`, the setuptools beside `python`), into `out_dir`; return (sdist, wheel). `make dist` runs it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="release-src-") as tmp:
        source = stage_sources(root, Path(tmp) / "src")
        command = [python, "-m", "build", "--no-isolation", "--sdist", "--wheel", "--outdir", str(out_dir), str(source)]
        env = {**os.environ, "SOURCE_DATE_EPOCH": "315532800"}
        result = subprocess.run(command, capture_output=True, text=True, env=env)
        if result.returncode != 0:
            raise RuntimeError(f"`{' '.join(command)}` failed:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}")
    (sdist,) = out_dir.glob("*.tar.gz")
    (wheel,) = out_dir.glob("*.whl")
    return sdist, wheel


def build_wheel(out_dir: Path, root: Path = PROJECT_ROOT, python: str = sys.executable) -> Path:
    """Build the library's wheel from `root` into `out_dir`, offline, and return its path.

    `--no-build-isolation --no-index`: pip uses the setuptools installed beside `python` (pinned in
    requirements.txt) and never reaches an index, so `cdk synth` works without a network. The sources are
    copied first, because setuptools builds in place and would leave `build/` and `*.egg-info` in the checkout.
    `SOURCE_DATE_EPOCH` fixes the zip's timestamps: the same sources give the same bytes (and CDK asset hash).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="wheel-src-") as tmp:
        source = stage_sources(root, Path(tmp) / "src")
        dist = Path(tmp) / "dist"
        command = [python, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index"]
        env = {**os.environ, "SOURCE_DATE_EPOCH": "315532800", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        result = subprocess.run([*command, "-w", str(dist), str(source)], capture_output=True, text=True, env=env)
        if result.returncode != 0:
            raise RuntimeError(
                f"building the wheel failed ({' '.join(command)}; it needs setuptools>=77 beside {python}, as "
                f"requirements.txt pins it):\n{result.stderr[-3000:]}"
            )
        (wheel,) = dist.glob("*.whl")
        target = out_dir / wheel.name
        shutil.move(wheel, target)
    return target


def bootstrap_script() -> str:
    """The bootstrap action that installs the wheelhouse (infra.wheelhouse.build_wheelhouse) for the Python the
    jobs use, from the wheelhouse only and only what its requirements.txt pins by hash.

    Arguments on the cluster: the interpreter (`pythonExecutable`, the one the lock's wheels are for) and the
    wheelhouse's S3 URI (a zip: CDK packs a folder asset so). Nothing is fetched from an index (`--no-index`:
    the nodes have no internet route), and pip refuses any file whose hash differs (`--require-hashes`). Spark
    is not installed yet when bootstrap actions run, so the check imports the connector's modules that do not
    need pyspark; pyspark finds `pyspark_aws_kinesis` by itself later.
    """
    return f"""#!/bin/bash
# EMR bootstrap action (runs on every node before Spark starts): install the connector's wheel and its locked
# dependencies from the wheelhouse, offline and by hash, for the interpreter the jobs use. From infra/packaging.py.
set -euo pipefail
PYTHON="${{1:?usage: $0 PYTHON WHEELHOUSE_S3_URI}}"
WHEELHOUSE_URI="${{2:?usage: $0 PYTHON WHEELHOUSE_S3_URI}}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
aws s3 cp --only-show-errors "$WHEELHOUSE_URI" "$WORK/wheelhouse.zip"
"$PYTHON" -m zipfile -e "$WORK/wheelhouse.zip" "$WORK/wheelhouse"
sudo "$PYTHON" -m pip install --quiet --no-cache-dir --no-index --require-hashes \\
    --find-links "$WORK/wheelhouse" -r "$WORK/wheelhouse/{REQUIREMENTS_NAME}"
"$PYTHON" -c 'import pyspark_aws_kinesis.options, pyspark_aws_kinesis.kpl, pyarrow, boto3'
"""


def write_bootstrap_script(out_dir: Path) -> Path:
    """Write the bootstrap script into `out_dir` and return its path (an S3 asset in `infra.emr`)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / BOOTSTRAP_SCRIPT
    target.write_text(bootstrap_script())
    return target


def job_arguments(
    *,
    job: str,
    source_stream: str,
    sink_stream: str,
    region: str,
    bucket: str,
    metadata_table: str | None = None,
    extra: list[str] | None = None,
) -> list[str]:
    """The job's own CLI (shared by every sample job), with its checkpoint and stop marker in `bucket` and, when
    given, the source's metadata in the DynamoDB table `metadata_table`."""
    table = ["--metadata-table", metadata_table] if metadata_table else []
    return [
        "--source-stream",
        source_stream,
        "--sink-stream",
        sink_stream,
        "--region",
        region,
        "--checkpoint-location",
        f"s3://{bucket}/{layout.CHECKPOINTS_PREFIX}{job}",
        "--stop-marker",
        f"s3://{bucket}/{layout.MARKERS_PREFIX}{job}.stop",
        *table,
        *(extra or []),
    ]


def spark_submit_command(*, job_uri: str, pyfiles_uri: str, python: str, job_args: list[str]) -> list[str]:
    """`spark-submit` in cluster mode with the jobs' zip on --py-files: the step's command-runner args.

    The connector is not shipped: the bootstrap action installed its wheel, and pyspark registers
    `format("aws-kinesis")` from it by itself.
    """
    return [
        "spark-submit",
        "--deploy-mode",
        "cluster",
        "--conf",
        f"spark.pyspark.python={python}",
        "--conf",
        f"spark.pyspark.driver.python={python}",
        "--py-files",
        pyfiles_uri,
        job_uri,
        *job_args,
    ]


# EMR Serverless unpacks `spark.archives` entries into each container's working directory under the name after
# `#`; the packed environment's interpreter is then ./environment/bin/python on the driver and the executors.
SERVERLESS_ENV = "environment"
SERVERLESS_PYTHON = f"./{SERVERLESS_ENV}/bin/python"


def serverless_job_driver(*, job_uri: str, pyfiles_uri: str, venv_uri: str, job_args: list[str]) -> dict:
    """StartJobRun's `jobDriver` for EMR Serverless: the same job and arguments as the cluster's step, with the
    packed environment (infra.wheelhouse.build_venv_archive) as Python on the driver and the executors."""
    conf = {
        "spark.archives": f"{venv_uri}#{SERVERLESS_ENV}",
        "spark.emr-serverless.driverEnv.PYSPARK_DRIVER_PYTHON": SERVERLESS_PYTHON,
        "spark.emr-serverless.driverEnv.PYSPARK_PYTHON": SERVERLESS_PYTHON,
        "spark.executorEnv.PYSPARK_PYTHON": SERVERLESS_PYTHON,
        "spark.submit.pyFiles": pyfiles_uri,
    }
    return {
        "sparkSubmit": {
            "entryPoint": job_uri,
            "entryPointArguments": job_args,
            "sparkSubmitParameters": " ".join(f"--conf {key}={value}" for key, value in conf.items()),
        }
    }
