"""The soak harness's own reading of a run: when the drain is over (``drained``) and which batch a kill left
uncommitted (``uncommitted_batch``, on checkpoint logs laid out as Spark writes them)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from bench.soak import drained, uncommitted_batch


def test_the_drain_ends_when_the_sink_holds_every_record_though_the_progress_count_stays_short() -> None:
    """A batch that finished in the second before a SIGKILL is missing from the progress the driver polled, and it
    never runs again: the row count stays short for good, and only the sink can say the query took everything."""
    owed = Counter({"a": 1, "b": 2, "c": 1})
    sink_reads: list[int] = []

    def sink(ids: str):
        def read() -> Counter[str]:
            sink_reads.append(1)
            return Counter(ids)

        return read

    assert drained(4, owed, None) and drained(4, owed, sink(""))  # the count says so: the sink is not read
    assert not sink_reads
    assert not drained(3, owed, None)  # short, the sink not asked this time
    assert not drained(3, owed, sink("ab"))  # short, and the sink lacks "c"
    assert drained(3, owed, sink("abc"))  # short, but every owed record is in the sink


def _log(checkpoint: Path, name: str, batches: range) -> None:
    (checkpoint / name).mkdir(parents=True)
    for batch in batches:
        (checkpoint / name / str(batch)).write_text("v1")
    (checkpoint / name / f".{batches.stop}.tmp").write_text("")  # a write in flight: not a batch


def test_the_uncommitted_batch_is_the_last_planned_one_without_a_commit(tmp_path: Path) -> None:
    _log(tmp_path, "offsets", range(12))
    _log(tmp_path, "commits", range(11))
    assert uncommitted_batch(tmp_path) == 11
    (tmp_path / "commits" / "11").write_text("v1")
    assert uncommitted_batch(tmp_path) is None


def test_a_checkpoint_without_logs_has_no_uncommitted_batch(tmp_path: Path) -> None:
    assert uncommitted_batch(tmp_path) is None
