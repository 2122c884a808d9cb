"""What a release publishes: `make dist` (infra.packaging.build_release) builds the sdist and, from it, the wheel
with `python -m build`, offline; both carry valid core metadata (checked by `packaging.metadata`, which refuses
what PyPI would), the version written once in pyproject.toml, and the same files as the wheel the stacks ship."""

from __future__ import annotations

import re
import tarfile
import zipfile
from pathlib import Path

import pytest
from packaging.metadata import Metadata

from infra import packaging

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return packaging.build_release(tmp_path_factory.mktemp("release"))


def wheel_metadata(wheel: Path) -> tuple[bytes, list[str]]:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        return archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))), names


def test_sdist_and_wheel_carry_valid_metadata_and_the_one_version(release: tuple[Path, Path]) -> None:
    sdist, wheel = release
    version = packaging.project_version()
    assert sdist.name == f"pyspark_aws_kinesis-{version}.tar.gz"
    assert wheel.name == f"pyspark_aws_kinesis-{version}-py3-none-any.whl"
    with tarfile.open(sdist) as archive:
        pkg_info = archive.extractfile(f"pyspark_aws_kinesis-{version}/PKG-INFO").read()
    for raw in (pkg_info, wheel_metadata(wheel)[0]):
        metadata = Metadata.from_email(raw, validate=True)  # raises on anything invalid
        assert (metadata.name, str(metadata.version)) == ("pyspark-aws-kinesis", version)
        assert str(metadata.requires_python) == ">=3.11"
        assert metadata.license_expression == "Apache-2.0"
        assert metadata.description_content_type == "text/markdown"


def test_the_release_wheel_holds_what_the_stacks_ship(release: tuple[Path, Path], tmp_path: Path) -> None:
    _, wheel = release
    shipped = packaging.build_wheel(tmp_path)
    released_names = wheel_metadata(wheel)[1]
    shipped_names = wheel_metadata(shipped)[1]
    assert released_names == shipped_names
    with tarfile.open(release[0]) as archive:
        in_sdist = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    # The packages as real folders under their import names (the checkout's links are resolved), so the wheel
    # built from the sdist holds them as the one built from the checkout does.
    needed = ("pyproject.toml", "README.md", "LICENSE", "pyspark_aws_kinesis/fetch/fanout/broker.py")
    for name in (*needed, "kinesis_generator/templates/seed.json"):
        assert name in in_sdist, name
    with tarfile.open(release[0]) as archive:
        assert not [m.name for m in archive.getmembers() if m.issym() or m.islnk()]
    assert not {name.split("/")[0] for name in in_sdist} & {"connector", "generator"}


def test_the_changelog_names_the_version_being_built() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    newest = re.search(r"^## (\S+)", changelog, re.MULTILINE)
    assert newest is not None, "CHANGELOG.md has no '## <version>' entry"
    assert newest.group(1) == packaging.project_version()
