"""What EMR installs, exactly: the connector's dependencies locked by hash for the nodes' platform, fetched once
into a cache, and assembled at synth with the connector's own wheel into a wheelhouse that installs offline.

The nodes (Graviton, EMR on EC2 and EMR Serverless on emr-spark-8.0.0) run CPython 3.11 on Linux aarch64 with
glibc 2.34 (Amazon Linux 2023); `TARGET` says so. The lock, `infra/emr-lock.txt`, holds one wheel per package:
`name==version --hash=sha256:...  # file name`, every package at the version requirements.txt pins (the one the
tests run), so the cluster runs what we tested. It is written by `make emr-lock` (`python -m infra.wheelhouse
lock`, which needs PyPI) and committed.

At synth, `infra.emr` and `infra.serverless` call `build_wheelhouse`: the lock's wheels come from the cache
(`$KINESIS_WHEEL_CACHE`, default `~/.cache/pyspark-aws-kinesis/wheels`), in a folder named by the lock's hash;
only when that folder is missing or a file in it does not match its hash does synth download them (PyPI, or the
index your pip configuration names), once per lock. Every file is checked against the lock on every synth, and
pip resolves the wheelhouse offline (`--no-index --require-hashes`, dry run) before it becomes an asset, so a
lock that misses a dependency of the wheel fails the synth, not the cluster's bootstrap.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

LOCK_PATH = Path("infra") / "emr-lock.txt"
REQUIREMENTS_NAME = "requirements.txt"
CACHE_ENV = "KINESIS_WHEEL_CACHE"
# The connector's runtime dependencies (pyproject.toml's), pinned to requirements.txt's versions by `lock`.
CONNECTOR_DEPENDENCIES = ("pyarrow", "boto3", "botocore", "aws-kinesis-agg", "protobuf", "six", "msgspec")
_PIN_RE = re.compile(r"^([A-Za-z0-9_.-]+)==(\S+)\s+--hash=sha256:([0-9a-f]{64})(?:\s+#\s*(\S+\.whl))?\s*$")
_EXACT_PIN_RE = re.compile(r"^([A-Za-z0-9_.-]+)==([A-Za-z0-9_.+!-]+)")


@dataclass(frozen=True)
class Target:
    """The platform the nodes run: what pip must select wheels for."""

    python: str  # major.minor
    glibc: tuple[int, int]
    machine: str

    @property
    def abi(self) -> str:
        return "cp" + self.python.replace(".", "")

    @property
    def interpreter(self) -> str:
        return f"python{self.python}"

    @property
    def platforms(self) -> list[str]:
        """Every manylinux tag a wheel for this glibc may carry (pip does not expand them for --platform)."""
        major, minor = self.glibc
        return [f"manylinux_{major}_{m}_{self.machine}" for m in range(minor, 16, -1)] + [
            f"manylinux2014_{self.machine}"
        ]

    def pip_platform_args(self) -> list[str]:
        args = ["--only-binary=:all:", "--implementation", "cp", "--python-version", self.python, "--abi", self.abi]
        for platform in self.platforms:
            args += ["--platform", platform]
        return args


# emr-spark-8.0.0 on Graviton: Amazon Linux 2023 (glibc 2.34), CPython 3.11 (also 3.12 and 3.13 there; 3.11 is
# the version the project's pyspark 4.0.2 environment, .venv-compat, tests on).
TARGET = Target(python="3.11", glibc=(2, 34), machine="aarch64")


class WheelhouseError(RuntimeError):
    """The lock, the cache or the wheelhouse is not what it must be; the message says what to do."""


@dataclass(frozen=True)
class Pin:
    """One line of the lock."""

    name: str
    version: str
    sha256: str
    filename: str | None

    def line(self) -> str:
        comment = f"  # {self.filename}" if self.filename else ""
        return f"{self.name}=={self.version} --hash=sha256:{self.sha256}{comment}"


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def parse_lock(path: Path) -> list[Pin]:
    """The pins of a lock file; every non-comment line must be `name==version --hash=sha256:...  # file.whl`."""
    if not path.is_file():
        raise WheelhouseError(f"{path}: no such lock file; write it with `make emr-lock`")
    pins = []
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _PIN_RE.match(line)
        if not match or not match.group(4):
            raise WheelhouseError(
                f"{path}:{number}: {line!r} is not `name==version --hash=sha256:<64 hex>  # <file>.whl`; "
                "regenerate the lock with `make emr-lock`"
            )
        pins.append(Pin(*match.groups()))
    if not pins:
        raise WheelhouseError(f"{path}: the lock holds no pins; regenerate it with `make emr-lock`")
    return pins


def lock_digest(path: Path) -> str:
    return sha256_of(path)[:16]


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV])
    return Path.home() / ".cache" / "pyspark-aws-kinesis" / "wheels"


def _pip(args: list[str], what: str, python: str = sys.executable) -> subprocess.CompletedProcess:
    command = [python, "-m", "pip", *args]
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise WheelhouseError(f"{what} failed (pip {' '.join(args[:2])} ...):\n{result.stderr[-3000:]}")
    return result


def _verified(folder: Path, pins: list[Pin]) -> bool:
    """True when every pinned wheel is in `folder` with the hash the lock names."""
    return all((folder / pin.filename).is_file() and sha256_of(folder / pin.filename) == pin.sha256 for pin in pins)


def fetch(
    lock: Path, cache: Path, *, target: Target = TARGET, index_args: list[str] | None = None
) -> tuple[Path, list[Pin]]:
    """The folder holding every wheel of `lock`, each checked against its hash; downloads only what is missing.

    `index_args` replace pip's index settings (tests: `--no-index --find-links <dir>`); by default pip uses the
    user's configuration (PyPI or a mirror).
    """
    pins = parse_lock(lock)
    folder = cache / lock_digest(lock)
    if _verified(folder, pins):
        return folder, pins
    with tempfile.TemporaryDirectory(prefix="wheel-fetch-") as tmp:
        # The lock's own hashes are the download's: pip refuses a file that does not match.
        _pip(
            ["download", "--quiet", "--no-deps", "--require-hashes", *target.pip_platform_args(), *(index_args or []),
             "-r", str(lock), "-d", tmp],
            f"downloading the wheels of {lock} for {target.abi} {target.machine} (synth needs PyPI, or the index "
            f"your pip configuration names, once per lock; they are kept in {cache}, see ${CACHE_ENV})",
        )  # fmt: skip
        got = {path.name for path in Path(tmp).glob("*.whl")}
        missing = [pin.filename for pin in pins if pin.filename not in got]
        if missing:
            raise WheelhouseError(f"{lock}: pip downloaded other files than the lock names ({', '.join(missing)})")
        folder.mkdir(parents=True, exist_ok=True)
        for pin in pins:
            shutil.copy(Path(tmp) / pin.filename, folder / pin.filename)
    if not _verified(folder, pins):
        raise WheelhouseError(f"{folder}: the cached wheels do not match {lock}; delete the folder and synth again")
    return folder, pins


def build_wheelhouse(
    out_dir: Path,
    project_wheel: Path,
    lock: Path,
    *,
    cache: Path | None = None,
    target: Target = TARGET,
    index_args: list[str] | None = None,
) -> Path:
    """`out_dir/wheelhouse/`: the lock's wheels, the project's wheel and a requirements.txt pinning each of them
    by hash, checked by an offline dry-run install for `target`. Returns the folder (a CDK asset)."""
    source, pins = fetch(lock, cache or cache_root(), target=target, index_args=index_args)
    house = out_dir / "wheelhouse"
    house.mkdir(parents=True)
    for pin in pins:
        shutil.copy(source / pin.filename, house / pin.filename)
    shutil.copy(project_wheel, house / project_wheel.name)
    name, version = project_wheel.name.split("-")[:2]
    own = Pin(name.replace("_", "-"), version, sha256_of(project_wheel), project_wheel.name)
    header = f"# What EMR installs ({target.abi}, {target.platforms[0]}): {lock.name} and the connector's wheel.\n"
    (house / REQUIREMENTS_NAME).write_text(header + "".join(pin.line() + "\n" for pin in [*pins, own]))
    with tempfile.TemporaryDirectory(prefix="wheelhouse-check-") as tmp:
        _pip(
            ["install", "--dry-run", "--quiet", "--no-index", "--find-links", str(house), "--require-hashes",
             *target.pip_platform_args(), "--target", tmp, "-r", str(house / REQUIREMENTS_NAME)],
            f"resolving the wheelhouse offline (does {lock} hold every dependency of {project_wheel.name}, at the "
            "versions it allows? regenerate the lock with `make emr-lock`)",
        )  # fmt: skip
    return house


def build_venv_archive(out_dir: Path, wheelhouse: Path, *, target: Target = TARGET, cache: Path | None = None) -> Path:
    """A venv-pack style `pyspark_venv.tgz` of the wheelhouse for `target`, for EMR Serverless's
    `spark.archives` (infra.serverless): `lib/python3.X/site-packages` installed from the wheelhouse only
    (offline, by hash, for aarch64 though built here), `bin/python` linking the image's own interpreter
    (`/usr/bin/python3.X`), and a `pyvenv.cfg`, so `./environment/bin/python` is a venv of exactly these packages.

    Deterministic (sorted members, fixed times and owners) and cached by the wheelhouse's requirements hash: a
    synth whose code did not change reuses the archive instead of packing ~200 MB again.
    """
    # .tgz, not .tar.gz: Spark unpacks an archive by its extension, and a CDK asset's S3 key keeps only the last.
    key = sha256_of(wheelhouse / REQUIREMENTS_NAME)[:16]
    cached = (cache or cache_root()) / "venvs" / f"{key}.tgz"
    target_file = out_dir / "pyspark_venv.tgz"
    out_dir.mkdir(parents=True, exist_ok=True)
    if not cached.is_file():
        with tempfile.TemporaryDirectory(prefix="venv-build-") as tmp:
            env_dir = Path(tmp) / "venv"
            site = env_dir / "lib" / target.interpreter / "site-packages"
            _pip(
                ["install", "--quiet", "--no-index", "--find-links", str(wheelhouse), "--require-hashes",
                 *target.pip_platform_args(), "--no-compile", "--target", str(site),
                 "-r", str(wheelhouse / REQUIREMENTS_NAME)],
                "installing the wheelhouse into the Serverless environment",
            )  # fmt: skip
            shutil.rmtree(site / "bin", ignore_errors=True)  # console scripts with this machine's shebang
            bin_dir = env_dir / "bin"
            bin_dir.mkdir()
            for name in ("python", "python3", target.interpreter):
                (bin_dir / name).symlink_to(f"/usr/bin/{target.interpreter}")
            (env_dir / "pyvenv.cfg").write_text(
                f"home = /usr/bin\ninclude-system-site-packages = false\nversion = {target.python}\n"
            )
            cached.parent.mkdir(parents=True, exist_ok=True)
            partial = cached.with_suffix(".partial")
            _write_tar(env_dir, partial)
            partial.replace(cached)
    shutil.copy(cached, target_file)
    return target_file


def _write_tar(root: Path, archive: Path) -> None:
    def clean(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.mtime, info.uid, info.gid, info.uname, info.gname = 315532800, 0, 0, "", ""
        return info

    with tarfile.open(archive, "w:gz", compresslevel=6) as tar:
        for path in sorted(root.rglob("*")):
            if path.is_dir() and not path.is_symlink():
                continue
            tar.add(path, arcname=path.relative_to(root).as_posix(), recursive=False, filter=clean)


# --- writing the lock (maintainers, with PyPI) -----------------------------------------------------------------


def requirement_pins(requirements: Path) -> dict[str, str]:
    """`normalized name -> name==version` for every exact pin of a requirements file (hash lines allowed)."""
    pins = {}
    for raw in requirements.read_text().splitlines():
        match = _EXACT_PIN_RE.match(raw.split("#")[0].strip())
        if match:
            pins[normalize(match.group(1))] = f"{match.group(1)}=={match.group(2)}"
    return pins


def write_lock(lock: Path, requirements: Path, *, target: Target = TARGET, index_args: list[str] | None = None) -> None:
    """Resolve the connector's dependencies at requirements.txt's versions for `target`, download each wheel and
    write the lock with its hash. Every package the resolution brings in must be pinned in requirements.txt
    too (so the tests ran the same version): otherwise this fails and names it."""
    pinned = requirement_pins(requirements)
    missing = [name for name in CONNECTOR_DEPENDENCIES if normalize(name) not in pinned]
    if missing:
        raise WheelhouseError(f"{requirements} does not pin {', '.join(missing)} with '=='")
    with tempfile.TemporaryDirectory(prefix="emr-lock-") as tmp:
        constraints = Path(tmp) / "constraints.txt"
        constraints.write_text("\n".join(pinned.values()) + "\n")
        wanted = [pinned[normalize(name)] for name in CONNECTOR_DEPENDENCIES]
        _pip(
            ["download", "--quiet", *target.pip_platform_args(), *(index_args or []), "-c", str(constraints),
             "-d", tmp, *wanted],
            "resolving the connector's dependencies for the EMR platform",
        )  # fmt: skip
        pins = []
        for wheel in sorted(Path(tmp).glob("*.whl"), key=lambda p: normalize(p.name.split("-")[0])):
            name, version = wheel.name.split("-")[:2]
            if pinned.get(normalize(name)) is None:
                raise WheelhouseError(f"{name} {version} is needed on EMR but not pinned in {requirements}")
            pins.append(Pin(normalize(name), version, sha256_of(wheel), wheel.name))
    header = (
        f"# The connector's runtime dependencies on EMR (emr-spark-8.0.0, Graviton): CPython {target.python}, "
        f"{target.platforms[0]}.\n"
        "# Every version is requirements.txt's; one wheel each, with its hash. Written by `make emr-lock` "
        "(python -m infra.wheelhouse lock); do not edit.\n"
    )
    lock.write_text(header + "".join(pin.line() + "\n" for pin in pins))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.wheelhouse", description="write or fetch the EMR lock")
    parser.add_argument("action", choices=("lock", "fetch"))
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args(argv)
    lock = args.root / LOCK_PATH
    try:
        if args.action == "lock":
            write_lock(lock, args.root / "requirements.txt")
            print(f"wrote {lock} ({len(parse_lock(lock))} wheels)")
        else:
            folder, pins = fetch(lock, cache_root())
            print(f"{len(pins)} wheels of {lock} in {folder}")
    except WheelhouseError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
