"""``pyspark_aws_kinesis.sink.entries``: batches at the service limits (500 entries; 5 MiB, or 10 MiB on a stream
raised above 1 MiB records), an entry over the stream's maximum (its key included) refused before its batch with how
to raise it, bad partition keys refused."""

from __future__ import annotations

import pytest

from pyspark_aws_kinesis.sink.entries import MAX_ENTRIES_PER_CALL, Entry, RecordLimits, batches
from tests.connector.sink.shard_map_util import _entries

MIB = 1024 * 1024

# --- batching ---------------------------------------------------------------------------------------------


def test_batches_fill_to_500_entries_in_order() -> None:
    entries = _entries(1201)
    grouped = list(batches(entries))
    assert [len(batch) for batch in grouped] == [MAX_ENTRIES_PER_CALL, MAX_ENTRIES_PER_CALL, 201]
    assert [entry for batch in grouped for entry in batch] == entries


def test_batches_fill_to_5_mib() -> None:
    # 1 MiB minus the key: each entry exactly at the record limit, so five fill one call.
    big = [Entry(b"x" * (MIB - 2), f"{i:02d}") for i in range(11)]
    grouped = list(batches(big))
    assert [len(batch) for batch in grouped] == [5, 5, 1]
    assert all(sum(entry.size for entry in batch) <= 5 * MIB for batch in grouped)


def test_batches_fill_to_10_mib_on_a_stream_raised_above_1_mib() -> None:
    raised = RecordLimits(4 * MIB)
    big = [Entry(b"x" * (MIB - 2), f"{i:02d}") for i in range(11)]
    assert [len(batch) for batch in batches(big, raised)] == [10, 1]
    large = [Entry(b"y" * (3 * MIB), f"{i:02d}") for i in range(4)]
    assert [len(batch) for batch in batches(large, raised)] == [3, 1]


def test_an_entry_over_1_mib_including_its_key_is_refused_before_its_batch() -> None:
    too_big = Entry(b"x" * (MIB - 3), "abcd")  # data fits, data + key does not
    with pytest.raises(
        ValueError,
        match=r"1048577 bytes .* over the stream's maximum record size of 1048576 bytes "
        r"\(1024 KiB\); the stream's owner can raise it up to 10240 KiB \(aws kinesis update-max",
    ):
        list(batches([Entry(b"ok", "k"), too_big]))


def test_an_entry_over_a_raised_maximum_is_refused_and_10_mib_cannot_be_raised() -> None:
    with pytest.raises(ValueError, match=r"4194305 bytes .* of 4194304 bytes \(4096 KiB\); the stream's owner"):
        list(batches([Entry(b"x" * (4 * MIB), "k")], RecordLimits(4 * MIB)))
    with pytest.raises(ValueError, match=r"of 10485760 bytes \(10240 KiB\) \(the largest Kinesis takes\)"):
        list(batches([Entry(b"x" * (10 * MIB), "k")], RecordLimits(10 * MIB)))


@pytest.mark.parametrize(("key", "problem"), [("", "non-empty partition key"), ("k" * 257, "longer than the 256")])
def test_bad_partition_keys_are_refused(key: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        list(batches([Entry(b"x", key)]))
