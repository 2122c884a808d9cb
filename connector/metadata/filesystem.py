"""Path stores on a local (or mounted shared) filesystem and on any filesystem pyarrow opens (HDFS).

Who calls it: ``open_store``, for a local path, ``file://`` or a URI pyarrow knows. A local file is linked into
place (``os.link`` fails if the name exists), so two attempts of one task cannot both win; pyarrow's ``move``
replaces an existing file, so there first-write-wins holds only between attempts that do not overlap (docs/source.md,
"First write wins, store by store"). pyarrow's HadoopFileSystem needs libhdfs and a Hadoop CLASSPATH (as on EMR).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from pathlib import Path

from .store import PathStore


class LocalStore(PathStore):
    """JSON files under a local directory."""

    def _path(self, relative: str) -> Path:
        return Path(self.root) / relative

    def _read(self, relative: str) -> bytes | None:
        try:
            return self._path(relative).read_bytes()
        except FileNotFoundError:
            return None

    def _create(self, relative: str, body: bytes) -> bool:
        target = self._path(relative)
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
        with open(temporary, "wb") as handle:
            handle.write(body)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temporary, target)
            return True
        except FileExistsError:
            return False
        finally:
            temporary.unlink()

    def _list_dirs(self, relative: str) -> list[str]:
        try:
            return [entry.name for entry in os.scandir(self._path(relative)) if entry.is_dir()]
        except FileNotFoundError:
            return []

    def _list_files(self, relative: str) -> list[str]:
        try:
            return [entry.name for entry in os.scandir(self._path(relative)) if entry.is_file()]
        except FileNotFoundError:
            return []

    def _delete_file(self, relative: str) -> None:
        self._path(relative).unlink(missing_ok=True)

    def _delete_tree(self, relative: str) -> None:
        shutil.rmtree(self._path(relative), ignore_errors=True)


class ArrowFileSystemStore(PathStore):
    """JSON files on a filesystem opened by ``pyarrow.fs.FileSystem.from_uri`` (HDFS and friends)."""

    def __init__(self, root: str, filesystem=None):
        super().__init__(root)
        import pyarrow.fs as pafs

        if filesystem is None:
            filesystem, base = pafs.FileSystem.from_uri(self.root)
        else:
            base = self.root
        self._fs = filesystem
        self._base = base.rstrip("/")
        self._pafs = pafs

    def _path(self, relative: str) -> str:
        return f"{self._base}/{relative}"

    def _read(self, relative: str) -> bytes | None:
        try:
            with self._fs.open_input_stream(self._path(relative)) as stream:
                return stream.read()
        except FileNotFoundError:
            return None

    def _create(self, relative: str, body: bytes) -> bool:
        target = self._path(relative)
        if self._fs.get_file_info(target).type != self._pafs.FileType.NotFound:
            return False
        parent = target.rsplit("/", 1)[0]
        self._fs.create_dir(parent, recursive=True)
        temporary = f"{parent}/.{uuid.uuid4().hex}.tmp"
        with self._fs.open_output_stream(temporary) as stream:
            stream.write(body)
        try:
            # Not exclusive: pyarrow's move replaces a file another attempt moved here since the check above
            # (see the module doc for this limit).
            self._fs.move(temporary, target)
            return True
        except OSError:
            with contextlib.suppress(OSError):
                self._fs.delete_file(temporary)
            return False

    def _list_dirs(self, relative: str) -> list[str]:
        selector = self._pafs.FileSelector(self._path(relative), allow_not_found=True)
        directory = self._pafs.FileType.Directory
        return [info.base_name for info in self._fs.get_file_info(selector) if info.type == directory]

    def _list_files(self, relative: str) -> list[str]:
        selector = self._pafs.FileSelector(self._path(relative), allow_not_found=True)
        regular = self._pafs.FileType.File
        return [info.base_name for info in self._fs.get_file_info(selector) if info.type == regular]

    def _delete_file(self, relative: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._fs.delete_file(self._path(relative))

    def _delete_tree(self, relative: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._fs.delete_dir(self._path(relative))
