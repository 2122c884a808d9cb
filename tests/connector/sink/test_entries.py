"""``pyspark_aws_kinesis.sink.entries``: batches at the service limits (500 entries, 5 MiB), an entry over 1 MiB
(its key included) refused before its batch, bad partition keys refused."""

from __future__ import annotations

import pytest

from pyspark_aws_kinesis.sink.entries import MAX_BYTES_PER_CALL, MAX_ENTRIES_PER_CALL, MAX_ENTRY_BYTES, Entry, batches
from tests.connector.sink.shard_map_util import _entries

# --- batching ---------------------------------------------------------------------------------------------


def test_batches_fill_to_500_entries_in_order() -> None:
    entries = _entries(1201)
    grouped = list(batches(entries))
    assert [len(batch) for batch in grouped] == [MAX_ENTRIES_PER_CALL, MAX_ENTRIES_PER_CALL, 201]
    assert [entry for batch in grouped for entry in batch] == entries


def test_batches_fill_to_5_mib() -> None:
    # 1 MiB minus the key: each entry exactly at the record limit, so five fill one call.
    big = [Entry(b"x" * (MAX_ENTRY_BYTES - 2), f"{i:02d}") for i in range(11)]
    grouped = list(batches(big))
    assert [len(batch) for batch in grouped] == [5, 5, 1]
    assert all(sum(entry.size for entry in batch) <= MAX_BYTES_PER_CALL for batch in grouped)


def test_an_entry_over_1_mib_including_its_key_is_refused_before_its_batch() -> None:
    too_big = Entry(b"x" * (MAX_ENTRY_BYTES - 3), "abcd")  # data fits, data + key does not
    with pytest.raises(ValueError, match=r"1048577 bytes .* over the Kinesis limit of 1048576"):
        list(batches([Entry(b"ok", "k"), too_big]))


@pytest.mark.parametrize(("key", "problem"), [("", "non-empty partition key"), ("k" * 257, "longer than the 256")])
def test_bad_partition_keys_are_refused(key: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        list(batches([Entry(b"x", key)]))
