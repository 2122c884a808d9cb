"""The code shipped to EMR: the jobs' --py-files zip, the bootstrap script that installs the wheelhouse (the
connector's wheel, built offline: tests/package/test_wheel.py, and its hash-locked dependencies), and the
spark-submit command."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from infra import packaging, wheelhouse

ROOT = Path(__file__).resolve().parents[2]


def make_tree(root: Path) -> Path:
    for name, text in {
        "pyspark_aws_kinesis/__init__.py": "X = 1\n",
        "pyspark_aws_kinesis/fetch/__init__.py": "",
        "pyspark_aws_kinesis/fetch/polling.py": "Y = 2\n",
        "pyspark_aws_kinesis/__pycache__/x.cpython-311.pyc": "junk",
        "spark_app/country_counts.py": "print('job')\n",
        "kinesis_generator/cli.py": "not shipped\n",
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
    zipped = packaging.build_pyfiles_zip(tmp_path / "out", root, packages=("pyspark_aws_kinesis",))
    # -I: an isolated interpreter that sees only the zip (what --py-files puts on the workers' path).
    code = f"import sys; sys.path.insert(0, {str(zipped)!r}); import pyspark_aws_kinesis.fetch.polling as p; print(p.Y)"
    result = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "2"


def test_zip_without_any_package_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="none of the packages spark_app exist"):
        packaging.build_pyfiles_zip(tmp_path / "out", tmp_path)


def test_bootstrap_script_installs_the_wheelhouse_offline_by_hash_and_is_valid_bash(tmp_path):
    text = packaging.write_bootstrap_script(tmp_path).read_text()
    assert 'PYTHON="${1:?' in text and 'WHEELHOUSE_URI="${2:?' in text
    assert 'aws s3 cp --only-show-errors "$WHEELHOUSE_URI" "$WORK/wheelhouse.zip"' in text
    install = " ".join(text.split("sudo ", 1)[1].split("\n")[0:2]).replace("\\", "").split()
    assert install[:5] == ['"$PYTHON"', "-m", "pip", "install", "--quiet"]
    assert {"--no-index", "--require-hashes"} <= set(install)
    assert install[-2:] == ["-r", '"$WORK/wheelhouse/requirements.txt"']
    subprocess.run(["bash", "-n", str(tmp_path / packaging.BOOTSTRAP_SCRIPT)], check=True)


def _zip_folder(folder: Path, target: Path) -> Path:
    """What CDK uploads for a folder asset: a zip of its files, at the zip's root."""
    with zipfile.ZipFile(target, "w") as archive:
        for path in sorted(folder.iterdir()):
            archive.write(path, path.name)
    return target


def _run_bootstrap(tmp_path: Path, wheelhouse_zip: Path) -> tuple[subprocess.CompletedProcess, Path]:
    """Run the script with stand-ins for `aws` and `sudo`, and this venv's Python installing into a scratch
    target for the nodes' platform (pip never touches this venv); the check imports from that target first."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "aws").write_text('#!/bin/bash\n# aws s3 cp --only-show-errors SRC DST\ncp "$4" "$5"\n')
    (bin_dir / "sudo").write_text('#!/bin/bash\nexec "$@"\n')
    target = tmp_path / "target"
    python = bin_dir / "python-under-test"
    platform = " ".join(wheelhouse.TARGET.pip_platform_args())
    python.write_text(
        f'#!/bin/bash\nif [ "$1 $2" = "-m pip" ]; then exec {sys.executable} "$@" --target {target} {platform}; fi\n'
        f'PYTHONPATH={target} exec {sys.executable} "$@"\n'
    )
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    script = packaging.write_bootstrap_script(tmp_path)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "PIP_CONFIG_FILE": "/dev/null"}
    result = subprocess.run(
        ["bash", str(script), str(python), str(wheelhouse_zip)], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    return result, target


@pytest.fixture(scope="module")
def built_wheelhouse(tmp_path_factory, stand_in_wheels, wheel_cache) -> Path:
    """The wheelhouse synth builds: the real connector wheel and a stand-in for every locked dependency."""
    out = tmp_path_factory.mktemp("wheelhouse")
    wheel = packaging.build_wheel(out / "dist")
    return wheelhouse.build_wheelhouse(out / "build", wheel, stand_in_wheels, cache=wheel_cache)


def test_bootstrap_script_installs_the_wheelhouse_that_synth_builds(tmp_path, built_wheelhouse, stand_in_wheels):
    """Every wheel (aarch64 ones included) installed for the nodes' platform from the zip alone: no index,
    every hash checked."""
    house = built_wheelhouse
    result, target = _run_bootstrap(tmp_path, _zip_folder(house, tmp_path / "0123abcd.zip"))
    assert result.returncode == 0, result.stderr
    assert (target / "pyspark_aws_kinesis" / "options" / "__init__.py").is_file()
    assert (target / "kinesis_generator" / "templates" / "seed.json").is_file()
    installed = {p.name.split("-")[0].lower().replace("_", "-") for p in target.glob("*.dist-info")}
    assert installed == {pin.name for pin in wheelhouse.parse_lock(stand_in_wheels)} | {"pyspark-aws-kinesis"}


def test_bootstrap_script_refuses_a_wheel_whose_hash_changed(tmp_path, built_wheelhouse):
    house = tmp_path / "wheelhouse"
    shutil.copytree(built_wheelhouse, house)
    (six,) = house.glob("six-*.whl")
    with zipfile.ZipFile(six, "a") as archive:  # still a valid wheel, but not the one the lock names
        archive.writestr("six_extra.py", "X = 1\n")
    result, target = _run_bootstrap(tmp_path, _zip_folder(house, tmp_path / "0123abcd.zip"))
    assert result.returncode != 0
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in result.stderr
    assert not (target / "pyspark_aws_kinesis").exists()


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
