"""The import names: the folders connector/ and generator/ are imported only as ``pyspark_aws_kinesis`` and
``kinesis_generator`` (docs/design.md, "Folder and import name").

In the checkout both the folder and the link at the root are importable, so one import of the folder's own name
would load a second copy of every module (two option registries, two loggers, two ``KinesisDataSource`` classes);
the wheel has no such name at all, so that import would also fail for users. This scan keeps the old names out.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# folder -> the name it is imported as
IMPORT_NAMES = {"connector": "pyspark_aws_kinesis", "generator": "kinesis_generator"}


def tracked_python_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    files = [ROOT / name for name in listed.stdout.split("\0") if name]
    assert len(files) > 100, "git ls-files found too few Python files: is this a checkout?"
    return files


def old_name_imports(source: str, filename: str) -> list[str]:
    """``import connector[.x]`` / ``from generator[.x] import y`` (absolute ones only) in ``source``, as
    ``file:line: module``."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        else:
            continue
        found += [f"{filename}:{node.lineno}: {m}" for m in modules if m.split(".")[0] in IMPORT_NAMES]
    return found


def test_no_tracked_python_file_imports_a_folder_name() -> None:
    found = []
    for path in tracked_python_files():
        found += old_name_imports(path.read_text(), str(path.relative_to(ROOT)))
    assert not found, f"import these as {IMPORT_NAMES} (one module copy per process):\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "import connector\n",
        "import os, generator.cli\n",
        "from connector.aws import clients\n",
        "from generator import run",
    ],
)
def test_the_scan_finds_each_form_of_an_old_name_import(source: str) -> None:
    assert old_name_imports(source, "x.py")


def test_the_scan_leaves_relative_and_similar_names_alone() -> None:
    source = "from . import options\nfrom ..connector import x\nimport connectors\nfrom tests.connector import y\n"
    assert old_name_imports(source, "x.py") == []


@pytest.mark.parametrize(("folder", "name"), list(IMPORT_NAMES.items()))
def test_the_import_name_is_a_link_to_the_folder(folder: str, name: str) -> None:
    link = ROOT / name
    assert link.is_symlink() and os.readlink(link) == folder, f"{name} must be a relative link to {folder}/"
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.origin is not None
    assert Path(spec.origin).resolve() == (ROOT / folder / "__init__.py").resolve()
    assert Path(spec.origin).parent == link  # imported through the link, so __file__ names the import name
