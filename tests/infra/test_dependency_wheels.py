"""The connector's compiled dependency installs where the connector runs: the package index has a wheel of
requirements.txt's msgspec for CPython 3.11, 3.12 and 3.13 on manylinux x86_64 and aarch64 (EMR's Graviton nodes,
which the CDK stack uses), so ``pip install pyspark-aws-kinesis`` never has to build it from source.

These ask the index pip is configured with (PyPI, or a mirror) with ``pip download --only-binary=:all: --platform
... --python-version ... --no-deps``: they need it reachable, and fail, saying so, when it is not (marked
``index``). A mirror that lacks a wheel PyPI has fails them too: that mirror could not install the connector there.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from packaging.utils import parse_wheel_filename

from infra import wheelhouse

ROOT = Path(__file__).resolve().parents[2]
# Compiled runtime dependencies whose wheels are checked here (pyarrow and protobuf: infra/emr-lock.txt for the
# nodes' own platform). msgspec decodes every GetRecords answer and SubscribeToShard event (connector/fetch/decode.py).
COMPILED = ("msgspec",)
PYTHONS = ("3.11", "3.12", "3.13")
MACHINES = ("x86_64", "aarch64")
# Amazon Linux 2023 (EMR 8 on EC2 and Serverless) has glibc 2.34: any manylinux tag up to it installs there.
GLIBC = (2, 34)


@pytest.mark.index
@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("python", PYTHONS)
@pytest.mark.parametrize("name", COMPILED)
def test_the_index_has_a_wheel_for_each_python_and_platform(
    tmp_path: Path, name: str, python: str, machine: str
) -> None:
    pin = wheelhouse.requirement_pins(ROOT / "requirements.txt")[name]
    target = wheelhouse.Target(python=python, glibc=GLIBC, machine=machine)
    command = [sys.executable, "-m", "pip", "download", pin, "--no-deps", "-d", str(tmp_path)]
    result = subprocess.run(
        [*command, *target.pip_platform_args()], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, (
        f"pip found no wheel of {pin} for CPython {python} on manylinux (glibc <= {GLIBC[0]}.{GLIBC[1]}) "
        f"{machine} in the configured index (`pip config list`; unreachable index, or a real gap):\n"
        f"{result.stderr[-2000:]}"
    )
    (wheel,) = tmp_path.glob("*.whl")
    _name, _version, _build, tags = parse_wheel_filename(wheel.name)
    assert any(tag.platform.endswith(machine) for tag in tags), wheel.name
    assert any(tag.interpreter in (target.abi, "py3") or tag.abi == "abi3" for tag in tags), wheel.name
