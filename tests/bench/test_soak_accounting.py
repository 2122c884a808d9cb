"""The soak's verdict on records: the sink is judged against what the source stream holds, not the sender's count.

A put the sender timed out on may still be stored (kinesis-mock under load answers after the client gave up), and a
retried put may be stored twice; the query owes the stream's content, so neither may count against it.
"""

from collections import Counter

from bench.soak import Tally


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
