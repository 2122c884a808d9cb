"""``bench.large_records.mix``: the records a large-record benchmark writes and reads have the share and sizes
asked for, and the bytes."""

from __future__ import annotations

from bench.large_records import SMALL_BYTES, mix
from kinesis_generator.large_records import LargeRecords

MiB = 1024 * 1024


def test_the_mix_holds_the_bytes_asked_with_the_share_of_large_records() -> None:
    records = mix(40 * MiB, LargeRecords(0.02, 5 * MiB))
    sizes = [len(key) + len(data) for key, data in records]
    large = [size for size in sizes if size > MiB]
    assert 40 * MiB <= sum(sizes) < 40 * MiB + 5 * MiB
    assert set(large) == {5 * MiB} and len(large) == int(len(records) * 0.02)
    assert set(sizes) - {5 * MiB} == {SMALL_BYTES}
