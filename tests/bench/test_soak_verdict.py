"""The soak's verdict (``bench.soak_verdict``). On records: the sink is judged against what the source stream
holds, not the sender's count.

A put the sender timed out on may still be stored (kinesis-mock under load answers after the client gave up), and a
retried put may be stored twice; the query owes the stream's content, so neither may count against it.
"""

from collections import Counter
from pathlib import Path

from bench.soak_verdict import NOT_JUDGED, Sample, Tally, judged_samples, open_shards_at, read_csv, write_csv


def test_a_timed_out_put_that_was_stored_is_owed_not_unexpected() -> None:
    acknowledged = Counter({"a": 1, "b": 1})
    held = Counter({"a": 1, "b": 1, "c": 1})  # c: stored although the sender saw a timeout
    tally = Tally.of(acknowledged, held, got=Counter({"a": 1, "b": 1, "c": 1}))
    assert (tally.unacknowledged_held, tally.missing, tally.unexpected, tally.duplicated) == (1, 0, 0, 0)


def test_a_put_stored_twice_may_be_delivered_twice_but_not_three_times() -> None:
    held = Counter({"a": 2, "b": 1})
    assert Tally.of(Counter({"a": 1, "b": 1}), held, got=Counter({"a": 2, "b": 1})).duplicated == 0
    assert Tally.of(Counter({"a": 1, "b": 1}), held, got=Counter({"a": 3, "b": 2})).duplicated == 2


def test_what_the_sink_lacks_or_invents_and_what_the_source_lost_are_counted() -> None:
    acknowledged = Counter({"a": 1, "b": 1, "z": 1})
    held = Counter({"a": 1, "b": 1})  # z: acknowledged, gone from the stream
    tally = Tally.of(acknowledged, held, got=Counter({"a": 1, "x": 2}))
    assert (tally.lost_by_source, tally.missing, tally.unexpected) == (1, 1, 2)


def test_store_entries_are_judged_per_open_shard_across_a_split_and_a_merge() -> None:
    reshards = [(1200.0, "split"), (2400.0, "merge")]
    assert [open_shards_at(t, 2, reshards) for t in (0, 1199, 1200, 2399, 2400, 3600)] == [2, 2, 3, 3, 2, 2]


def test_the_drain_after_the_records_stop_is_not_judged() -> None:
    """After the last record the query idles (pool threads retire, workers and the broker exit): not the run."""

    def sample(t_s: float, threads: int) -> Sample:
        return Sample(t_s, 1, 0, 0, 0, 70.0, 140.0, 40.0, 600.0, threads, *([1] * 21))

    samples = [sample(t, 290) for t in range(0, 3601, 60)] + [sample(3700.0, 89), sample(3800.0, 89)]
    kept = judged_samples(samples, warm_up=600.0, restarts=[], end_s=3600.0)
    assert kept and all(s.jvm_threads == 290 for s in kept) and kept[-1].t_s == 3600.0


def test_an_older_csv_without_the_young_column_is_read_again(tmp_path: Path) -> None:
    sample = Sample(*([1.0, 1] + [0] * 29))
    write_csv([sample], tmp_path / "soak.csv")
    lines = (tmp_path / "soak.csv").read_text().splitlines()
    header, row = lines[0].split(","), lines[1].split(",")
    (tmp_path / "old.csv").write_text(",".join(header[:-1]) + "\n" + ",".join(row[:-1]) + "\n")
    assert read_csv(tmp_path / "old.csv")[0].jvm_young_after_gc_mb == 0.0
    assert "jvm_young_after_gc_mb" in NOT_JUDGED
