"""How `make test` hands tests to pytest-xdist workers (``--dist loadgroup``; docs/testing.md):

- tests that share a fixture built once per module or directory (a wheel, synthesized templates) run on one
  worker, so it is built once and nothing it owns (a fixed port, a directory) is used by two workers at once;
- slow tests are handed out first, so that the last tests to end are short ones.

xdist 3.8 names a test's group by appending ``@group`` to its node id, which pytest 9 no longer lets a plugin
change; so each worker writes the groups it computed to a file and the controller's scheduler reads them there.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

GROUPS_FILE_ENV = "KINESIS_TEST_XDIST_GROUPS"
WIDE_SCOPES = ("module", "package", "session")
SHARED_PER_WORKER = ("", "tests")  # tests/conftest.py's servers and Spark: every worker has its own anyway


def shared_fixture_home(item: pytest.Item) -> str | None:
    """Where the widest-scoped fixture ``item`` uses is defined (a test module or a conftest directory), leaving
    out the fixtures every worker builds for itself."""
    homes = []
    for definitions in item._fixtureinfo.name2fixturedefs.values():  # type: ignore[attr-defined]
        fixture = definitions[-1]
        if fixture.scope in WIDE_SCOPES and fixture.baseid not in SHARED_PER_WORKER:
            homes.append((WIDE_SCOPES.index(fixture.scope), fixture.baseid))
    return max(homes)[1] if homes else None


def pytest_configure(config: pytest.Config) -> None:
    """The controller of a loadgroup run picks the file its workers write the groups to (they inherit it)."""
    if config.getoption("dist", "no") == "loadgroup" and not os.environ.get("PYTEST_XDIST_WORKER"):
        handle, path = tempfile.mkstemp(prefix="xdist-groups-", suffix=".json")
        os.close(handle)
        os.environ[GROUPS_FILE_ENV] = path
        config.add_cleanup(lambda: Path(path).unlink(missing_ok=True))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    path = os.environ.get(GROUPS_FILE_ENV)
    if not path or not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    groups = {item.nodeid: home for item in items if (home := shared_fixture_home(item))}
    # Every worker collects the same tests: each writes the same map, whole (replace is atomic).
    with tempfile.NamedTemporaryFile("w", dir=Path(path).parent, delete=False, suffix=".part") as part:
        json.dump(groups, part)
    os.replace(part.name, path)


@pytest.hookimpl(optionalhook=True)  # pytest -p no:xdist runs without it
def pytest_xdist_make_scheduler(config: pytest.Config, log):  # type: ignore[no-untyped-def]
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class FileGroupScheduling(LoadGroupScheduling):
        """xdist's loadgroup, with the groups read from the workers' file (read once all have collected)."""

        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:
                self.groups = json.loads(Path(os.environ[GROUPS_FILE_ENV]).read_text() or "{}")
            return self.groups.get(nodeid, nodeid)

    return FileGroupScheduling(config, log)
