"""The soak harness's own reading of a run: the ids a stream or the file sink holds, read on from the last call
(``StreamIds``, ``FileSinkIds``), when the drain is over (``drained``) and which batch a kill left uncommitted
(``uncommitted_batch``, on checkpoint logs laid out as Spark writes them)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from bench.soak import FileSinkIds, StreamIds, drained, uncommitted_batch
from localaws.streams import put_records


def _put(kinesis, stream: str, ids: str) -> None:
    put_records(kinesis, stream, [(json.dumps({"id": i}).encode(), i) for i in ids])


def test_stream_ids_read_on_from_the_last_record_they_read(kinesalite, lite_stream) -> None:
    """Read again from the start, the first ids would count twice (the drain asks every ten seconds)."""
    stream, kinesis = lite_stream(shards=2), kinesalite.client()
    read = StreamIds(kinesis, stream)
    _put(kinesis, stream, "abc")
    assert read() == Counter("abc")
    _put(kinesis, stream, "de")
    assert read() == Counter("abcde")
    assert read() == Counter("abcde")


def _commit(sink: Path, batch: int, lines_per_file: list[str]) -> None:
    entries = []
    for number, lines in enumerate(lines_per_file):
        part = sink / f"part-{batch}-{number}.json"
        part.write_text("".join(json.dumps({"id": i}) + "\n" for i in lines))
        entries.append(json.dumps({"path": f"file://{part}"}))
    (sink / "_spark_metadata").mkdir(exist_ok=True)
    (sink / "_spark_metadata" / str(batch)).write_text("\n".join(["v1", *entries]))


def test_file_sink_ids_read_each_committed_file_once(tmp_path: Path) -> None:
    read = FileSinkIds(tmp_path)
    _commit(tmp_path, 0, ["ab", "c"])
    (tmp_path / "part-1-0.json").write_text(json.dumps({"id": "x"}))  # written by a batch a kill interrupted
    assert read() == Counter("abc")
    _commit(tmp_path, 1, ["d"])
    assert read() == Counter("abcd")


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
