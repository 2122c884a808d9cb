"""The aws_cdk modules that a synth imports are compiled at install. The Makefile compiles aws_cdk by importing the
CDK app, not all its 183 MB of source; with ``PYTHONDONTWRITEBYTECODE`` set, as on CI, a module it left out would be
compiled again by every process that synthesizes (docs/testing.md, "Setup")."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

CDK_PACKAGES = ("aws_cdk", "constructs", "cdk_nag")


def process_start() -> float:
    """When this process started (epoch s). pytest's own process writes compiled files (tests/conftest.py), so a
    compiled file written after that is this process's, not the install's."""
    ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
    boot = next(
        int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime")
    )
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def compiled_before(path: str, moment: float) -> bool:
    compiled = Path(importlib.util.cache_from_source(path))
    return compiled.is_file() and compiled.stat().st_mtime < moment


def test_every_cdk_module_a_synth_imported_was_compiled_before_the_tests(templates: dict) -> None:
    loaded = [
        module.__file__
        for name, module in list(sys.modules.items())
        if name.split(".")[0] in CDK_PACKAGES and getattr(module, "__file__", None)
    ]
    assert len(loaded) > 50  # the synth of the templates fixture ran in this process
    started = process_start()
    assert [path for path in loaded if not compiled_before(path, started)] == []


def test_a_module_compiled_by_this_process_is_not_taken_for_the_installs(tmp_path: Path) -> None:
    source = tmp_path / "fresh.py"
    source.write_text("x = 1\n")
    assert not compiled_before(str(source), process_start())
    importlib.util.spec_from_file_location("fresh", source).loader.exec_module(type(sys)("fresh"))
    assert Path(importlib.util.cache_from_source(str(source))).is_file()
    assert not compiled_before(str(source), process_start())
