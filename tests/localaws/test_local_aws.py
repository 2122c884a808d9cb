"""LocalAws's own directory: the servers' logs go where the caller says, or into a directory removed at stop."""

from __future__ import annotations

from pathlib import Path

from localaws import LocalAws
from localaws.servers import KINESALITE


def test_a_directory_it_made_itself_is_removed_at_stop() -> None:
    with LocalAws([KINESALITE]) as aws:
        made = aws.log_dir
        assert any(made.glob("kinesalite-*.log"))
    assert not made.exists()


def test_a_directory_the_caller_named_is_kept_with_the_logs(tmp_path: Path) -> None:
    with LocalAws([KINESALITE], log_dir=tmp_path / "logs") as aws:
        aws.kinesalite.client("kinesis").list_streams()
    assert any((tmp_path / "logs").glob("kinesalite-*.log"))
