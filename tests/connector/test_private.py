"""Every default the connector writes on a host is this user's alone (``pyspark_aws_kinesis.private``): the default
metadata path and the consumer deregistration watcher's log live in ``<temp dir>/<name>-<uid>``, created 0700,
refused (never followed) when a symbolic link or another user's directory holds the name; a watcher that cannot
log still deregisters; private logs start over at their bound without following links. docs/security.md names the
test behind each of its statements: each one exists."""

from __future__ import annotations

import logging
import os
import re
import stat
import tempfile
from pathlib import Path

import pytest

from localaws import LocalServer
from pyspark_aws_kinesis.consumers import WATCHER_DIR, WATCHER_LOG, QueryConsumers
from pyspark_aws_kinesis.metadata.location import DEFAULT_METADATA_DIR
from pyspark_aws_kinesis.options import OptionError
from pyspark_aws_kinesis.private import private_log
from pyspark_aws_kinesis.source.settings import SourceSettings
from tests.connector.support.consumers_util import _names
from tests.connector.support.efo_util import settings
from tests.connector.support.source_util import wait_for


def test_every_test_the_security_doc_names_exists() -> None:
    """docs/security.md names the test behind each statement: each name is a test of tests/."""
    root = Path(__file__).resolve().parents[2]
    named = set(re.findall(r"\b(test_\w+)\b(?!\.py)", (root / "docs" / "security.md").read_text()))
    defined = {
        match
        for path in (root / "tests").rglob("test_*.py")
        for match in re.findall(r"^def (test_\w+)", path.read_text(), re.MULTILINE)
    }
    assert named and not {name for name in named if not any(test.startswith(name) for test in defined)}


NOBODY = 65534


def _metadata_path() -> str:
    return SourceSettings.from_options({"kinesis.streamname": "s", "kinesis.region": "eu-west-1"}).metadata_path


@pytest.fixture
def temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp dir of this test's own, for this process (tempfile) and the processes it starts (TMPDIR)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    return tmp_path


def test_the_default_metadata_path_is_per_user_and_private(temp_dir: Path) -> None:
    path = _metadata_path()
    assert path == str(temp_dir / f"{DEFAULT_METADATA_DIR}-{os.getuid()}")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
    assert _metadata_path() == path  # ours: used again


@pytest.mark.parametrize("squatted", ["symlink", "open mode", "other owner"])
def test_a_squatted_default_metadata_path_is_refused_naming_the_option(temp_dir: Path, squatted: str) -> None:
    path = temp_dir / f"{DEFAULT_METADATA_DIR}-{os.getuid()}"
    if squatted == "symlink":
        (temp_dir / "elsewhere").mkdir(mode=0o700)
        path.symlink_to(temp_dir / "elsewhere")
    elif squatted == "open mode":
        path.mkdir()
        path.chmod(0o777)
    else:
        if os.getuid() != 0:
            pytest.skip("needs root to give the directory away")
        path.mkdir(mode=0o700)
        os.chown(path, NOBODY, -1)
    with pytest.raises(OptionError, match=r"default of option kinesis\.metadataPath cannot be used: .*not .*private"):
        _metadata_path()


@pytest.mark.parametrize("log_dir", ["private", "symlink", "other owner"])
def test_the_watcher_logs_privately_and_deregisters_even_when_it_cannot_log(
    kinesis_mock: LocalServer, mock_stream, temp_dir: Path, log_dir: str
) -> None:
    """The driver's process goes away (its pipe to the watcher closes without "done"): the watcher deregisters the
    consumer, logging to its private directory, or nowhere when that name is squatted."""
    directory = temp_dir / f"{WATCHER_DIR}-{os.getuid()}"
    if log_dir == "symlink":
        (temp_dir / "elsewhere").mkdir(mode=0o700)
        directory.symlink_to(temp_dir / "elsewhere")
    elif log_dir == "other owner":
        if os.getuid() != 0:
            pytest.skip("needs root to give the directory away")
        directory.mkdir(mode=0o700)
        os.chown(directory, NOBODY, -1)
    stream = mock_stream(shards=1)
    consumers = QueryConsumers(settings(kinesis_mock.endpoint_url), (stream,), "watched", deregister=True)
    consumers.arns()
    assert _names(kinesis_mock, stream) == {"watched": "ACTIVE"}
    watcher, consumers._watcher = consumers._watcher, None  # as if the driver died: release() never runs
    assert watcher is not None and watcher.stdin is not None
    watcher.stdin.close()
    assert watcher.wait(60) == 0
    gone = lambda: _names(kinesis_mock, stream).get("watched", "DELETING") == "DELETING"  # noqa: E731
    wait_for(gone, 30, 0.2, "the deregistration")
    if log_dir == "private":
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
        assert "deregistering" in (directory / WATCHER_LOG).read_text()
    else:
        assert not (temp_dir / "elsewhere" / WATCHER_LOG).exists()


def _log_lines(handler: logging.Handler, count: int, prefix: str) -> None:
    logger = logging.Logger(f"test-{prefix}")
    logger.addHandler(handler)
    for i in range(count):
        logger.warning("%s %04d %s", prefix, i, "x" * 80)


def test_a_private_log_starts_over_at_its_bound_keeping_the_last_full_one(temp_dir: Path) -> None:
    """A helper process (the subscription broker, the deregistration watcher) may live for months: its log keeps
    at most two files of its bound, both private, the newest lines in the one named."""
    directory = temp_dir / "logs"
    handler = private_log(str(directory), "helper.log", max_bytes=10_000)
    _log_lines(handler, 1_000, "line")  # ~100 KB in all
    handler.close()
    current, previous = directory / "helper.log", directory / "helper.log.1"
    assert sorted(path.name for path in directory.iterdir()) == ["helper.log", "helper.log.1"]
    assert all(path.stat().st_size < 10_000 + 200 for path in (current, previous))
    assert all(stat.S_IMODE(path.stat().st_mode) == 0o600 for path in (current, previous))
    assert current.read_text().rstrip().endswith("line 0999 " + "x" * 80)
    last_before = int(previous.read_text().splitlines()[-1].split()[1])
    assert int(current.read_text().splitlines()[0].split()[1]) == last_before + 1  # nothing lost between them


def test_a_private_log_renamed_by_another_process_is_reopened_not_renamed_again(temp_dir: Path) -> None:
    directory = temp_dir / "shared"
    first = private_log(str(directory), "helper.log", max_bytes=5_000)
    second = private_log(str(directory), "helper.log", max_bytes=5_000)
    _log_lines(first, 60, "first")  # past the bound: the first starts over (renames, reopens)
    _log_lines(second, 1, "second")  # its file is now helper.log.1: it reopens helper.log, renames nothing
    first.close()
    second.close()
    current = (directory / "helper.log").read_text()
    assert "first 0059" in current and "second 0000" in current
    assert "first 0000" in (directory / "helper.log.1").read_text()  # the full one was not replaced


def test_a_private_log_never_writes_through_a_symbolic_link(temp_dir: Path) -> None:
    directory = temp_dir / "linked"
    directory.mkdir(mode=0o700)
    target = temp_dir / "elsewhere.log"
    (directory / "helper.log").symlink_to(target)
    with pytest.raises(OSError):
        private_log(str(directory), "helper.log")
    assert not target.exists()


def test_a_private_log_that_cannot_start_over_goes_on_in_the_full_one(
    temp_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = temp_dir / "stuck"
    handler = private_log(str(directory), "helper.log", max_bytes=100)
    monkeypatch.setattr(logging, "raiseExceptions", False)  # handleError: no traceback on stderr
    os.close(handler._dir_fd)  # the directory's handle is gone: no rename, no reopen
    _log_lines(handler, 5, "kept")  # never raises into the helper
    handler.close()
    assert (directory / "helper.log").read_text().count("kept ") == 5
