"""The connector's tests mirror its code (CONTRIBUTING.md, "Tests mirror the code"): the unit tests of
``connector/<package>/<module>.py`` are in ``tests/connector/<package>/test_<module>.py``, so that whoever changes a
module finds its tests by its name. A module may have more files, ``test_<module>_<topic>.py`` beside it
(``fetch/test_decode_parity.py``). Tests across modules (Spark queries, the source or sink driven as Spark drives
them) are in ``tests/connector/queries/``, helpers in ``tests/connector/support/``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CODE = ROOT / "connector"
TESTS = ROOT / "tests" / "connector"
# Folders of tests/connector that mirror no package: what they hold is said in their __init__.py.
NOT_MIRRORED = {"queries", "support"}
# Modules without a test file of their own, each with the reason. Keep it empty unless a module cannot be tested
# alone; a module that merely lacks tests gets them instead.
NO_TESTS: dict[str, str] = {}
# Test files of the mirrored folders that test no module, each with the reason.
NOT_A_MODULE = {"test_layout_mirrors_code.py": "this file: it checks the layout itself"}


def modules() -> list[Path]:
    """Every module of connector/ but the package and command-line entry points, relative to connector/."""
    return sorted(
        path.relative_to(CODE)
        for path in CODE.rglob("*.py")
        if path.name not in {"__init__.py", "__main__.py"} and "__pycache__" not in path.parts
    )


def mirrored_test(module: Path) -> Path:
    return TESTS / module.parent / f"test_{module.stem}.py"


def mirrored_test_files() -> list[Path]:
    """The test files of the folders that mirror connector/ (not queries/ or support/)."""
    return sorted(
        path
        for path in TESTS.rglob("test_*.py")
        if not NOT_MIRRORED & set(path.relative_to(TESTS).parts)
        and "__pycache__" not in path.parts
        and str(path.relative_to(TESTS)) not in NOT_A_MODULE
    )


def named_module(test_file: Path) -> Path | None:
    """The module a test file of the mirrored folders is named for: ``test_<module>.py`` or
    ``test_<module>_<topic>.py`` in the module's package (``test_main.py``: the package's ``__main__.py``)."""
    package = CODE / test_file.parent.relative_to(TESTS)
    name = test_file.stem.removeprefix("test_")
    if name == "main" and (package / "__main__.py").is_file():
        return package / "__main__.py"
    candidates = [path for path in package.glob("*.py") if name == path.stem or name.startswith(f"{path.stem}_")]
    return max(candidates, key=lambda path: len(path.stem), default=None)


def test_the_walk_finds_the_connectors_modules() -> None:
    found = {str(module) for module in modules()}
    assert {"kpl.py", "fetch/polling/transport.py", "source/probe.py", "sink/put_records.py"} <= found
    assert not {name for name in found if name.endswith("__init__.py")}


@pytest.mark.parametrize("module", [str(module) for module in modules()])
def test_every_module_has_a_test_file_named_for_it(module: str) -> None:
    if module in NO_TESTS:
        pytest.skip(NO_TESTS[module])
    expected = mirrored_test(Path(module))
    assert expected.is_file(), f"connector/{module}: its unit tests belong in {expected.relative_to(ROOT)}"


def test_the_exceptions_name_modules_that_still_lack_tests() -> None:
    for module, reason in NO_TESTS.items():
        assert (CODE / module).is_file(), f"NO_TESTS names connector/{module}, which is gone"
        assert not mirrored_test(Path(module)).is_file(), f"connector/{module} has tests now: take it out of NO_TESTS"
        assert reason.strip(), f"NO_TESTS[{module!r}] needs a reason"


def test_every_test_file_of_the_mirrored_folders_names_a_module() -> None:
    orphans = [str(path.relative_to(ROOT)) for path in mirrored_test_files() if named_module(path) is None]
    assert not orphans, (
        "name these for the module they test (test_<module>.py or test_<module>_<topic>.py in the mirrored folder), "
        f"or move them to tests/connector/queries/ if they run across modules: {orphans}"
    )


def test_every_folder_of_the_tests_mirrors_a_package_or_says_what_it_holds() -> None:
    for folder in sorted(path for path in TESTS.rglob("*") if path.is_dir() and "__pycache__" not in path.parts):
        relative = folder.relative_to(TESTS)
        if relative.parts[0] in NOT_MIRRORED:
            continue
        assert (CODE / relative).is_dir(), f"{folder.relative_to(ROOT)} mirrors no package of connector/"


def test_every_folder_with_tests_is_a_package() -> None:
    """Test files of the same name live in several folders (aws/test_settings.py, source/test_settings.py): each
    folder must be a package, so that each file is its own module."""
    folders = {path.parent for path in TESTS.rglob("test_*.py")} | {TESTS}
    missing = sorted(str(folder.relative_to(ROOT)) for folder in folders if not (folder / "__init__.py").is_file())
    assert not missing, f"add an __init__.py to {missing}"


@pytest.mark.parametrize(
    ("test_file", "module"),
    [
        ("test_kpl.py", "kpl.py"),
        ("fetch/polling/test_transport.py", "fetch/polling/transport.py"),
        ("fetch/polling/test_transport_quotas.py", "fetch/polling/transport.py"),
        ("source/test_probe_turns.py", "source/probe_turns.py"),
        ("source/test_probe.py", "source/probe.py"),
        ("test_main.py", "__main__.py"),
        ("fetch/test_nothing.py", None),
        ("sink/test_put_records_and_more.py", "sink/put_records.py"),
    ],
)
def test_a_test_file_is_matched_to_the_longest_module_name_it_starts_with(test_file: str, module: str | None) -> None:
    found = named_module(TESTS / test_file)
    assert (found and str(found.relative_to(CODE))) == module
