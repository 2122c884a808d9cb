"""The installs of ``make setup`` / ``make test``: uv installs without compiling, then ``compileall`` compiles every
installed module but the packages' own test folders and aws_cdk (the Makefile's ``COMPILE_INSTALLED``; the aws_cdk
modules the CDK app imports are compiled by importing them: tests/infra/test_cdk_compiled.py). With
``PYTHONDONTWRITEBYTECODE`` set, as on CI, a module left uncompiled is compiled again by every process that imports
it (docs/testing.md, "Setup").
"""

from __future__ import annotations

import importlib.util
import py_compile
import re
from pathlib import Path

import pytest

from tests.package.test_pyspark_zip_hook import PROJECT_VENVS, purelib

LEFT_OUT = re.compile(r"/tests?/|^aws_cdk/")  # the Makefile's -x pattern, in the path below site-packages/


def uncompiled_modules(site_packages: Path) -> list[str]:
    """Installed modules outside test folders and aws_cdk that have no compiled file of this Python's tag."""
    missing = []
    for source in site_packages.rglob("*.py"):
        inside = source.relative_to(site_packages).as_posix()
        if not LEFT_OUT.search(inside) and not Path(importlib.util.cache_from_source(str(source))).is_file():
            missing.append("/" + inside)
    return missing


@pytest.mark.parametrize("venv", PROJECT_VENVS, ids=lambda venv: venv.name)
def test_every_installed_module_but_test_folders_and_aws_cdk_is_compiled(venv: Path) -> None:
    site_packages = purelib(venv)
    assert len(list(site_packages.glob("pyspark/sql/*.py"))) > 20  # the venv's packages are there to check
    assert uncompiled_modules(site_packages) == []


def test_a_module_without_its_compiled_file_is_found(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "tests").mkdir(parents=True)
    (tmp_path / "aws_cdk").mkdir()
    for name in ("pkg/__init__.py", "pkg/kept.py", "pkg/tests/test_it.py", "aws_cdk/__init__.py"):
        (tmp_path / name).write_text("x = 1\n")
    py_compile.compile(str(tmp_path / "pkg/__init__.py"))
    assert uncompiled_modules(tmp_path) == ["/pkg/kept.py"]
