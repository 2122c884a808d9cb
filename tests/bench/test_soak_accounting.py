"""The soak's verdicts. On records: the sink is judged against what the source stream holds, not the sender's count.

A put the sender timed out on may still be stored (kinesis-mock under load answers after the client gave up), and a
retried put may be stored twice; the query owes the stream's content, so neither may count against it.
"""

from collections import Counter

from bench.soak import Sample, Tally, drained, judged_samples, open_shards_at


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
