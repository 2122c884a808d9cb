"""Private per-user directories for what the connector writes on a host by default, opened without following links.

Who calls it: ``fetch.fanout.client`` and ``fetch.fanout.broker`` (the subscription broker's socket, pid file, start
lock and log), ``consumers`` (the deregistration watcher's log) and ``source.settings`` / ``metadata.filesystem`` (the
default metadata path). Another local user could create ``<temp dir>/<name>-<uid>`` first, so each use checks the
opened handle and works relative to it, never by name again (docs/security.md, "Files the connector writes by
default").
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import tempfile
from typing import TextIO

from .errors import KinesisConnectorError

# On Linux a Unix socket is bound and connected through the directory handle's /proc path: the opened directory
# itself, whatever a rename or a link swap does to its name.
_PROC_FD = "/proc/self/fd"


class NotPrivateError(KinesisConnectorError, OSError):
    """A directory that is not this user's alone (or not a directory: a link, a file)."""


def user_temp_path(name: str) -> str:
    """``<temp dir>/<name>-<uid>``: one default per user, never shared between users."""
    return os.path.join(tempfile.gettempdir(), f"{name}-{os.getuid()}")


def open_private_dir(path: str) -> int:
    """A handle (fd, close-on-exec) on directory ``path``, created 0700 when missing. Raises NotPrivateError when
    ``path`` is a symbolic link or not a directory, not owned by this user, or open to group or others."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)  # never follows a link at ``path``: EEXIST
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:  # ELOOP: a symbolic link; ENOTDIR: a file
        raise NotPrivateError(f"{path} is not a private directory of this user ({exc.strerror})") from None
    info = os.fstat(fd)
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid != os.getuid() or mode & 0o077:
        os.close(fd)
        raise NotPrivateError(
            f"{path} is not private to this user (owner uid {info.st_uid}, mode {mode:o}; "
            f"needed: uid {os.getuid()}, mode 700)"
        )
    return fd


def open_private_file(dir_fd: int, name: str, flags: int, mode: int = 0o600) -> int:
    """``name`` inside the private directory ``dir_fd``, never through a symbolic link, created ``mode``."""
    return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)


LOG_MAX_BYTES = 8 * 1024 * 1024  # a private log starts over beyond this, the full one kept as ``<name>.1``


class PrivateLog(logging.StreamHandler):
    """Logs to ``name`` in the private directory ``dir_fd`` (which it keeps open), started over once it holds
    ``max_bytes``: the full file becomes ``<name>.1`` (replacing the one before), renamed and reopened through the
    directory's handle, never by path. A helper process lives as long as its host's queries run: its log must not
    grow with it. Several processes may share the file; one that finds it already renamed by another reopens it."""

    def __init__(self, dir_fd: int, name: str, max_bytes: int = LOG_MAX_BYTES) -> None:
        self._dir_fd, self._file_name, self.max_bytes = dir_fd, name, max_bytes
        super().__init__(self._open())

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if os.fstat(self.stream.fileno()).st_size >= self.max_bytes:
                self._start_over()
        except OSError:  # a log that cannot start over is never the helper's failure: it goes on in the full one
            self.handleError(record)
        super().emit(record)

    def _open(self) -> TextIO:
        fd = open_private_file(self._dir_fd, self._file_name, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        return open(fd, "a", buffering=1)

    def _start_over(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            named = os.stat(self._file_name, dir_fd=self._dir_fd, follow_symlinks=False)
            if os.path.samestat(named, os.fstat(self.stream.fileno())):  # not renamed by another process yet
                os.replace(self._file_name, f"{self._file_name}.1", src_dir_fd=self._dir_fd, dst_dir_fd=self._dir_fd)
        self.setStream(self._open()).close()  # type: ignore[union-attr]


def private_log(path: str, name: str, max_bytes: int = LOG_MAX_BYTES) -> PrivateLog:
    """A log handler for ``<path>/<name>``, ``path`` a private directory (NotPrivateError otherwise)."""
    return PrivateLog(open_private_dir(path), name, max_bytes)


def socket_address(dir_fd: int, directory: str, name: str) -> str:
    """Where to bind or connect the Unix socket ``name`` of the private directory ``dir_fd`` (opened from
    ``directory``): through the handle on Linux; elsewhere by name (the directory was checked just before)."""
    if os.path.isdir(_PROC_FD):
        return f"{_PROC_FD}/{dir_fd}/{name}"
    return os.path.join(directory, name)
