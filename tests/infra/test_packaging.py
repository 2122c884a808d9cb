"""The code shipped to EMR: the jobs' --py-files zip, the bootstrap script that installs the connector's wheel
(built offline: tests/package/test_wheel.py), its pins, and the spark-submit command."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from infra import packaging

ROOT = Path(__file__).resolve().parents[2]


def make_tree(root: Path) -> Path:
    for name, text in {
        "connector/__init__.py": "X = 1\n",
        "connector/fetch/__init__.py": "",
        "connector/fetch/polling.py": "Y = 2\n",
        "connector/__pycache__/x.cpython-311.pyc": "junk",
        "spark_app/country_counts.py": "print('job')\n",
        "generator/cli.py": "not shipped\n",
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_zip_holds_the_jobs_at_its_root_without_caches_and_not_the_connector(tmp_path):
    root = make_tree(tmp_path / "src")
    with zipfile.ZipFile(packaging.build_pyfiles_zip(tmp_path / "out", root)) as archive:
        # The connector comes from the installed wheel; a copy in the zip would shadow it.
        assert sorted(archive.namelist()) == ["spark_app/country_counts.py"]
        assert archive.read("spark_app/country_counts.py") == b"print('job')\n"


def test_zip_is_byte_identical_for_the_same_sources(tmp_path):
    root = make_tree(tmp_path / "src")
    first = packaging.build_pyfiles_zip(tmp_path / "a", root).read_bytes()
    (root / "spark_app" / "country_counts.py").touch()  # a new mtime alone must not change the asset hash
    assert packaging.build_pyfiles_zip(tmp_path / "b", root).read_bytes() == first
    (root / "spark_app" / "country_counts.py").write_text("print('other')\n")
    assert packaging.build_pyfiles_zip(tmp_path / "c", root).read_bytes() != first


def test_zip_is_importable_as_py_files(tmp_path):
    root = make_tree(tmp_path / "src")
    zipped = packaging.build_pyfiles_zip(tmp_path / "out", root, packages=("connector",))
    # -I: an isolated interpreter that sees only the zip (what --py-files puts on the workers' path).
    code = f"import sys; sys.path.insert(0, {str(zipped)!r}); import connector.fetch.polling as p; print(p.Y)"
    result = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "2"


def test_zip_without_any_package_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="none of the packages spark_app exist"):
        packaging.build_pyfiles_zip(tmp_path / "out", tmp_path)


def test_pins_come_from_requirements_txt():
    pins = packaging.dependency_pins(ROOT / "requirements.txt")
    required = {line.split("==")[0].lower(): line for line in (ROOT / "requirements.txt").read_text().split()}
    assert pins == [required[name] for name in ("pyarrow", "boto3", "botocore", "aws-kinesis-agg", "protobuf", "six")]


def test_missing_pin_is_named(tmp_path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("pyarrow==26.0.1\nboto3>=1\nbotocore==1.44.5\naws_kinesis_agg==1.2.3\nprotobuf==7.36.2\n")
    with pytest.raises(ValueError, match="does not pin boto3, six with '=='"):
        packaging.dependency_pins(requirements)


def test_bootstrap_script_installs_the_wheel_with_the_pins_as_constraints_and_is_valid_bash(tmp_path):
    wheel = tmp_path / "pyspark_aws_kinesis-0.1.0-py3-none-any.whl"
    script = packaging.write_bootstrap_script(tmp_path, wheel, ROOT / "requirements.txt")
    text = script.read_text()
    constraints = text.split("<<'PINS'\n", 1)[1].split("\nPINS\n", 1)[0].splitlines()
    assert constraints == packaging.dependency_pins(ROOT / "requirements.txt")
    assert 'PYTHON="${1:-python3}"' in text and 'WHEEL_URI="${2:?' in text
    assert f'aws s3 cp --only-show-errors "$WHEEL_URI" "$WORK/{wheel.name}"' in text
    assert f'pip install --quiet --no-cache-dir -c "$WORK/constraints.txt" "$WORK/{wheel.name}"' in text
    subprocess.run(["bash", "-n", str(script)], check=True)


def test_bootstrap_script_installs_a_wheel_that_pip_accepts(tmp_path):
    """Run the script with stand-ins for `aws` and `sudo` and this venv's Python into a scratch target: the
    wheel copied under its real name installs with the pinned constraints, offline."""
    wheel = packaging.build_wheel(tmp_path / "dist")
    hashed = tmp_path / "0123abcd.whl"  # a CDK asset's object key is a hash, not a wheel file name
    hashed.write_bytes(wheel.read_bytes())
    script = packaging.write_bootstrap_script(tmp_path, wheel, ROOT / "requirements.txt")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "aws").write_text('#!/bin/bash\n# aws s3 cp --only-show-errors SRC DST\ncp "$4" "$5"\n')
    (bin_dir / "sudo").write_text('#!/bin/bash\nexec "$@"\n')
    target = tmp_path / "target"
    python = bin_dir / "python-under-test"
    # pip installs into --target (never this venv); the check imports from there.
    python.write_text(
        f'#!/bin/bash\nif [ "$1" = "-m" ]; then exec {sys.executable} "$@" --no-index --no-deps --target {target}; fi\n'
        f'PYTHONPATH={target} exec {sys.executable} "$@"\n'
    )
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "PIP_CONFIG_FILE": "/dev/null"}
    result = subprocess.run(
        ["bash", str(script), str(python), str(hashed)], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert (target / "pyspark_aws_kinesis.py").is_file()
    assert (target / "connector" / "options" / "__init__.py").is_file()


@pytest.mark.parametrize("job", ["../etc/passwd", "Country", "a-b", ""])
def test_job_names_are_module_names(job):
    with pytest.raises(ValueError, match="must be a module name under spark_app/"):
        packaging.job_entry(job)


def test_spark_submit_command_puts_the_zip_before_the_entry_and_the_job_args_after():
    command = packaging.spark_submit_command(
        job_uri="s3://b/code/country_counts.py",
        pyfiles_uri="s3://b/code/pyfiles.zip",
        python="python3.12",
        job_args=packaging.job_arguments(
            job="country_counts", source_stream="src", sink_stream="snk", region="eu-west-1", bucket="b", extra=["-x"]
        ),
    )
    assert command == [
        "spark-submit",
        "--deploy-mode",
        "cluster",
        "--conf",
        "spark.pyspark.python=python3.12",
        "--conf",
        "spark.pyspark.driver.python=python3.12",
        "--py-files",
        "s3://b/code/pyfiles.zip",
        "s3://b/code/country_counts.py",
        "--source-stream",
        "src",
        "--sink-stream",
        "snk",
        "--region",
        "eu-west-1",
        "--checkpoint-location",
        "s3://b/checkpoints/country_counts",
        "--stop-marker",
        "s3://b/markers/country_counts.stop",
        "-x",
    ]
