"""The path stores on a filesystem (``pyspark_aws_kinesis.metadata.filesystem``): ids cannot escape the store's
directory, and the pyarrow store's documented limit (first write wins only between attempts that do not overlap)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.fs as pafs
import pytest

from pyspark_aws_kinesis.fetch.reads import ShardRead
from pyspark_aws_kinesis.metadata.filesystem import ArrowFileSystemStore, LocalStore
from tests.connector.support.metadata_util import _read


class _InterleavingFileSystem:
    """pyarrow's LocalFileSystem (whose move replaces, like pyarrow's HDFS move), running ``during_move`` once
    just before the first move: a second attempt that writes at that very moment."""

    def __init__(self, during_move):
        self._fs = pafs.LocalFileSystem()
        self._during_move = during_move

    def __getattr__(self, name: str):
        return getattr(self._fs, name)

    def move(self, source: str, target: str) -> None:
        hook, self._during_move = self._during_move, None
        if hook is not None:
            hook()
        self._fs.move(source, target)


def test_pyarrow_store_first_write_wins_only_between_attempts_that_do_not_overlap(tmp_path: Path) -> None:
    """The documented limit (docs/source.md): pyarrow's move replaces an existing file, so two attempts whose
    writes overlap can both be told they won."""
    root = str(tmp_path / "meta")
    first, second = _read(records=1, last="11"), _read(records=2, last="22")
    told: dict[str, ShardRead] = {}

    def second_attempt() -> None:
        told["second"] = ArrowFileSystemStore(root, pafs.LocalFileSystem()).put_shard_read("src", 0, second)

    told["first"] = ArrowFileSystemStore(root, _InterleavingFileSystem(second_attempt)).put_shard_read("src", 0, first)
    assert told == {"first": first, "second": second}  # both believe they won: the limit
    assert (
        ArrowFileSystemStore(root, pafs.LocalFileSystem()).get_shard_read("src", 0, "stream-a", first.shard_id) == first
    )
    # Not overlapping: a later attempt meets the record and is told the winner's end.
    later = ArrowFileSystemStore(root, pafs.LocalFileSystem()).put_shard_read("src", 0, _read(records=3, last="33"))
    assert later == first


def test_ids_cannot_escape_the_store(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot be used in a metadata key"):
        LocalStore(str(tmp_path)).get_shard_read("../x", 0, "s", "shardId-0")
