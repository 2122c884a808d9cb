"""infra.wheelhouse: the committed EMR lock, fetching its wheels into the cache (offline here: pip reads a local
folder instead of PyPI), the wheelhouse and its offline resolution, and the packed Serverless environment."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import parse_wheel_filename

from infra import packaging, wheelhouse
from tests.infra.wheels import make_wheel, write_lock

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / wheelhouse.LOCK_PATH


def _target_tags(target: wheelhouse.Target) -> set[Tag]:
    version = tuple(int(part) for part in target.python.split("."))
    return set(cpython_tags(version, [target.abi], target.platforms)) | set(
        compatible_tags(version, target.abi, target.platforms)
    )


# --- the committed lock --------------------------------------------------------------------------------------


def test_lock_pins_exactly_the_versions_the_tests_run():
    """The cluster runs what we tested: every locked package is pinned in requirements.txt at the same version
    (the .venv the suite runs), and every runtime dependency of the connector is locked."""
    pinned = wheelhouse.requirement_pins(ROOT / "requirements.txt")
    pins = wheelhouse.parse_lock(LOCK)
    for pin in pins:
        assert pinned[pin.name].split("==")[1] == pin.version, pin
    assert {wheelhouse.normalize(n) for n in wheelhouse.CONNECTOR_DEPENDENCIES} <= {pin.name for pin in pins}


def test_lock_names_one_wheel_per_package_for_the_nodes_platform():
    target_tags = _target_tags(wheelhouse.TARGET)
    pins = wheelhouse.parse_lock(LOCK)
    assert len({pin.name for pin in pins}) == len(pins)
    for pin in pins:
        name, version, _, tags = parse_wheel_filename(pin.filename)
        assert (str(name), str(version)) == (pin.name, pin.version), pin
        assert tags & target_tags, f"{pin.filename} does not install on {wheelhouse.TARGET}"
    # pyarrow is the one that needs the platform: aarch64, CPython 3.11.
    (pyarrow,) = [pin for pin in pins if pin.name == "pyarrow"]
    assert "cp311" in pyarrow.filename and "aarch64" in pyarrow.filename


@pytest.mark.parametrize("name", ["requirements.txt", "requirements-compat.txt"])
def test_requirements_files_pin_every_package_by_hash(name):
    """`pip install -r` then runs in hash-checking mode: a file that is not the one locked is refused. And every
    pin of the .in is in the .txt at the same version (the .txt was compiled from it)."""
    text = (ROOT / name).read_text().replace("\\\n", " ")
    requirements = [line.split("#")[0].split() for line in text.splitlines() if line.split("#")[0].strip()]
    assert len(requirements) > 50
    for words in requirements:
        assert "==" in words[0] and any(w.startswith("--hash=sha256:") for w in words[1:]), words[0]
    locked = wheelhouse.requirement_pins(ROOT / name)
    for key, pin in wheelhouse.requirement_pins(ROOT / name.replace(".txt", ".in")).items():
        assert locked[key].split("==")[1] == pin.split("==")[1], pin


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("six==1.17.0\n", "is not `name==version --hash=sha256:<64 hex>  # <file>.whl`"),
        (f"six==1.17.0 --hash=sha256:{'0' * 64}\n", "is not `name==version"),
        ("# only a comment\n", "holds no pins"),
    ],
)
def test_a_malformed_lock_is_named_with_its_line(tmp_path, text, expected):
    lock = tmp_path / "emr-lock.txt"
    lock.write_text(text)
    with pytest.raises(wheelhouse.WheelhouseError, match=expected.replace("(", r"\(").replace("|", r"\|")):
        wheelhouse.parse_lock(lock)


# --- fetching into the cache ---------------------------------------------------------------------------------


@pytest.fixture
def index(tmp_path) -> tuple[Path, Path]:
    """A local "index" (a folder for --find-links) holding a pure wheel and an aarch64-only one, and their lock;
    the folder also holds an x86_64 wheel of the same version, which pip must not pick for the target."""
    folder = tmp_path / "index"
    wheels = [
        make_wheel(folder, "purepkg", "1.0"),
        make_wheel(folder, "nativepkg", "2.0", "cp311-cp311-manylinux_2_28_aarch64"),
    ]
    make_wheel(folder, "nativepkg", "2.0", "cp311-cp311-manylinux_2_28_x86_64")
    lock = tmp_path / "emr-lock.txt"
    write_lock(lock, wheels)
    return folder, lock


def test_fetch_downloads_the_locked_wheels_for_the_target_once(tmp_path, index):
    folder, lock = index
    cache = tmp_path / "cache"
    local = ["--no-index", "--find-links", str(folder)]
    got, pins = wheelhouse.fetch(lock, cache, index_args=local)
    assert got == cache / wheelhouse.lock_digest(lock)
    assert sorted(p.name for p in got.iterdir()) == sorted(pin.filename for pin in pins)
    # A second synth needs no index at all: the cache answers (the folder is gone).
    for wheel in folder.iterdir():
        wheel.unlink()
    assert wheelhouse.fetch(lock, cache, index_args=local)[0] == got


def test_fetch_refuses_a_wheel_whose_hash_is_not_the_locks(tmp_path, index):
    folder, lock = index
    make_wheel(folder, "purepkg", "1.0", files={"purepkg.py": "print('changed')\n"})  # same name, other bytes
    with pytest.raises(wheelhouse.WheelhouseError, match=r"downloading the wheels of .* failed"):
        wheelhouse.fetch(lock, tmp_path / "cache", index_args=["--no-index", "--find-links", str(folder)])


def test_fetch_downloads_again_when_a_cached_wheel_was_altered(tmp_path, index):
    folder, lock = index
    cache = tmp_path / "cache"
    local = ["--no-index", "--find-links", str(folder)]
    got, pins = wheelhouse.fetch(lock, cache, index_args=local)
    (got / pins[0].filename).write_bytes(b"tampered")
    assert wheelhouse.fetch(lock, cache, index_args=local)[0] == got
    assert wheelhouse.sha256_of(got / pins[0].filename) == pins[0].sha256


# --- the wheelhouse ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def project_wheel(tmp_path_factory) -> Path:
    return packaging.build_wheel(tmp_path_factory.mktemp("dist"))


def test_wheelhouse_pins_every_wheel_by_hash_and_resolves_offline(
    tmp_path, stand_in_wheels, wheel_cache, project_wheel
):
    house = wheelhouse.build_wheelhouse(tmp_path, project_wheel, stand_in_wheels, cache=wheel_cache)
    requirements = (house / wheelhouse.REQUIREMENTS_NAME).read_text().splitlines()[1:]
    pins = [*wheelhouse.parse_lock(stand_in_wheels)]
    assert requirements[:-1] == [pin.line() for pin in pins]
    assert requirements[-1].startswith(
        f"pyspark-aws-kinesis=={packaging.project_version()} --hash=sha256:" + wheelhouse.sha256_of(project_wheel)
    )
    assert sorted(p.name for p in house.glob("*.whl")) == sorted([*(p.filename for p in pins), project_wheel.name])


def test_wheelhouse_without_a_dependency_of_the_wheel_fails_the_synth(
    tmp_path, wheel_cache, stand_in_wheels, project_wheel
):
    """A lock that misses boto3 (which the connector's wheel requires) fails here, not at the cluster's boot."""
    pins = [pin for pin in wheelhouse.parse_lock(stand_in_wheels) if pin.name != "boto3"]
    lock = tmp_path / "emr-lock.txt"
    lock.write_text("".join(pin.line() + "\n" for pin in pins))
    folder = wheel_cache / wheelhouse.lock_digest(stand_in_wheels)
    cache = tmp_path / "cache"
    (cache / wheelhouse.lock_digest(lock)).mkdir(parents=True)
    for pin in pins:
        (cache / wheelhouse.lock_digest(lock) / pin.filename).write_bytes((folder / pin.filename).read_bytes())
    with pytest.raises(wheelhouse.WheelhouseError, match="resolving the wheelhouse offline") as error:
        wheelhouse.build_wheelhouse(tmp_path / "out", project_wheel, lock, cache=cache)
    assert "boto3" in str(error.value)


def test_venv_archive_is_reused_for_the_same_wheelhouse(tmp_path, stand_in_wheels, wheel_cache, project_wheel):
    house = wheelhouse.build_wheelhouse(tmp_path, project_wheel, stand_in_wheels, cache=wheel_cache)
    cache = tmp_path / "venv-cache"
    first = wheelhouse.build_venv_archive(tmp_path / "a", house, cache=cache).read_bytes()
    (cached,) = (cache / "venvs").glob("*.tgz")
    assert (
        wheelhouse.build_venv_archive(tmp_path / "b", house, cache=cache).read_bytes() == first == cached.read_bytes()
    )
    with tarfile.open(cached) as archive:
        assert "bin/python" in archive.getnames()
