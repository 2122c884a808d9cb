"""Small real wheels for the wheelhouse tests, made here so that no test needs PyPI.

`stand_in_lock` writes, for every pin of a lock, a wheel of the same name, version and file name (tags included)
that holds only its metadata (no modules, so installing it shadows nothing), a lock naming their hashes, and
fills a wheel cache with them as a synth would have: the stacks then build their wheelhouse, check every hash,
resolve it offline with pip and pack the Serverless environment exactly as with the real lock.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import zipfile
from pathlib import Path

from infra import wheelhouse


def make_wheel(out_dir: Path, name: str, version: str, tags: str = "py3-none-any", files: dict | None = None) -> Path:
    """A valid wheel `<name>-<version>-<tags>.whl` holding `files` (path -> text) and its dist-info."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    contents = {
        **(files or {}),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: {tags}\n",
    }
    record = []
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{dist}-{version}-{tags}.whl"
    with zipfile.ZipFile(target, "w") as archive:
        for path, text in sorted(contents.items()):
            data = text.encode()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{path},sha256={digest},{len(data)}")
            archive.writestr(zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0)), data)
        record.append(f"{info}/RECORD,,")
        archive.writestr(zipfile.ZipInfo(f"{info}/RECORD", date_time=(1980, 1, 1, 0, 0, 0)), "\n".join(record) + "\n")
    return target


def write_lock(lock: Path, wheels: list[Path]) -> list[wheelhouse.Pin]:
    pins = []
    for wheel in wheels:
        name, version = wheel.name.split("-")[:2]
        pins.append(wheelhouse.Pin(wheelhouse.normalize(name), version, wheelhouse.sha256_of(wheel), wheel.name))
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("# stand-in lock for the tests\n" + "".join(pin.line() + "\n" for pin in pins))
    return pins


def stand_in_lock(real_lock: Path, lock: Path, cache: Path, wheel_dir: Path) -> list[wheelhouse.Pin]:
    """Stand-ins for every pin of `real_lock` (same file names), their lock at `lock`, and `cache` filled."""
    wheels = []
    for pin in wheelhouse.parse_lock(real_lock):
        _name, version, tags = pin.filename.removesuffix(".whl").split("-", 2)
        wheels.append(make_wheel(wheel_dir, pin.name, version, tags))
    pins = write_lock(lock, wheels)
    folder = cache / wheelhouse.lock_digest(lock)
    folder.mkdir(parents=True, exist_ok=True)
    for wheel in wheels:
        shutil.copy(wheel, folder / wheel.name)
    return pins
