"""Our wheel beside another distribution that owns the generic top-level packages ``connector`` and ``generator``
(issue 26 item 3; docs/design.md, "Folder and import name"): both live in one environment, each imports with its
own content, pyspark finds ``format("aws-kinesis")`` by itself, and uninstalling the other leaves ours whole.

Under the old import names (the wheel held ``connector/`` and ``generator/``) pip let our install overwrite the
other's ``connector/__init__.py`` and its uninstall delete files of ours; this test failed there on the first check.
The other distribution is built here from a minimal pyproject (offline, with the setuptools of the project venv);
the venv is one of tests/package/venvs.py's fresh venvs, with the other distribution installed first.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from infra import packaging
from localaws import LocalServer

from .venvs import filled_stream_options, fresh_venv, project_python, run

APP = Path(__file__).with_name("wheel_app.py")
OTHER = "generic-names"  # the other distribution
# Its modules (a name each could clash on: the old wheel had every one of these files) and what each says.
OTHER_FILES = {
    "connector/__init__.py": "OWNER = 'generic-names connector'\n",
    "connector/datasource.py": "OWNER = 'generic-names connector.datasource'\n",
    "connector/options/__init__.py": "OWNER = 'generic-names connector.options'\n",
    "generator/__init__.py": "OWNER = 'generic-names generator'\n",
    "generator/cli.py": "OWNER = 'generic-names generator.cli'\n",
}
OTHER_MODULES = {
    path.removesuffix(".py").removesuffix("/__init__").replace("/", "."): text.split("'")[1]
    for path, text in OTHER_FILES.items()
}

# Run in the venv: what each module of the other distribution says, and whether ours is whole and ours.
CHECK = """
import importlib, importlib.metadata, json, sys
other = {}
for name in json.loads(sys.argv[1]):
    try:
        other[name] = getattr(importlib.import_module(name), "OWNER", "<no OWNER: not its own file>")
    except ImportError as exc:
        other[name] = f"ImportError: {exc}"
import kinesis_generator, pyspark_aws_kinesis
missing = [str(f) for f in importlib.metadata.distribution("pyspark-aws-kinesis").files if not f.locate().exists()]
print("RESULT " + json.dumps({
    "other": other,
    "ours": [pyspark_aws_kinesis.__file__, kinesis_generator.__file__],
    "source": pyspark_aws_kinesis.DefaultSource.name(),
    "register": callable(pyspark_aws_kinesis.register),
    "generator": callable(kinesis_generator.run) and bool(kinesis_generator.seed_template()),
    "missing": missing,
}))
"""


def build_other_wheel(where: Path, python: Path) -> Path:
    """The other distribution's wheel: top-level ``connector`` and ``generator`` packages, nothing else."""
    source = where / "src"
    for path, text in OTHER_FILES.items():
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        (source / path).write_text(text)
    packages = sorted({path.rsplit("/", 1)[0].replace("/", ".") for path in OTHER_FILES})
    (source / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=77"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "{OTHER}"\nversion = "1.0"\n[tool.setuptools]\npackages = {json.dumps(packages)}\n'
    )
    out = where / "dist"
    run(
        [python, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index", "-w", out, source],
        cwd=where,
    )
    (wheel,) = out.glob("*.whl")
    return wheel


def check(python: Path, work: Path) -> dict:
    out = run([python, "-c", CHECK, json.dumps(sorted(OTHER_MODULES))], work)
    (line,) = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    return json.loads(line.removeprefix("RESULT "))


@pytest.mark.slow
def test_our_wheel_and_a_distribution_owning_connector_and_generator_share_an_environment(
    kinesalite: LocalServer, lite_stream, tmp_path: Path
) -> None:
    base = project_python("newest")
    work = tmp_path / "work"
    work.mkdir()
    ours = packaging.build_wheel(tmp_path / "ours")
    other = build_other_wheel(tmp_path / "other", base)
    python = fresh_venv(base, tmp_path / "venv", ours, first=[other])
    venv = (tmp_path / "venv").resolve()

    together = check(python, work)
    assert together["other"] == OTHER_MODULES  # every module of the other distribution is its own
    assert all(Path(f).resolve().is_relative_to(venv) for f in together["ours"]), together["ours"]
    assert together["source"] == "aws-kinesis" and together["register"] and together["generator"]
    assert together["missing"] == []

    # pyspark's own lookup finds the source with no registration call (wheel_app.py never registers), here.
    stream = lite_stream(shards=1)
    produced = [f"beside-{i}" for i in range(4)]
    options = filled_stream_options(kinesalite, stream, produced, work)
    app = shutil.copy(APP, work / "app.py")  # outside the checkout: its directory goes first on sys.path
    spark_env = {"PYSPARK_PYTHON": str(python), "PYSPARK_DRIVER_PYTHON": str(python), "SPARK_LOCAL_IP": "127.0.0.1"}
    out = run([python, app, "classic", json.dumps(options), work], work, timeout=420, **spark_env)
    (line,) = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    result = json.loads(line.removeprefix("RESULT "))
    assert Path(result["connector"]).resolve().is_relative_to(venv), result["connector"]
    assert result["batch"] == result["stream"] == sorted(produced)

    # The other distribution goes; ours stays whole, and the generic names are gone with it.
    run([base, "-m", "pip", "--python", python, "uninstall", "--yes", OTHER], work)
    alone = check(python, work)
    assert all(said.startswith("ImportError") for said in alone["other"].values()), alone["other"]
    assert alone["missing"] == [] and alone["ours"] == together["ours"]
    assert alone["source"] == "aws-kinesis" and alone["register"] and alone["generator"]
