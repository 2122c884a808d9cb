"""``bench.source_throughput``: a query's CPU per GiB between its first and last batches, the compiler's part apart."""

from __future__ import annotations

from collections import Counter

import pytest

from bench.query_cpu import JIT
from bench.source_throughput import MeasuredQuery, steady_cpu_per_gib

KIB = 1024


def _query(steady_rows: int, steady_cpu: dict[str, float]) -> MeasuredQuery:
    return MeasuredQuery(0.0, [], Counter(), 0.0, steady_rows, Counter(steady_cpu), 0.0)


def test_each_querys_cpu_per_gib_is_its_steady_cpu_over_its_steady_bytes_with_the_compilers_part() -> None:
    one_gib_of_kib = 2**20  # records of 1 KiB
    queries = [
        _query(one_gib_of_kib, {JIT: 12.0, "Spark's Python workers": 20.0}),
        _query(one_gib_of_kib // 2, {JIT: 1.0, "Spark's Python workers": 9.0}),
    ]
    assert steady_cpu_per_gib(queries, KIB) == [pytest.approx((32.0, 12.0)), pytest.approx((20.0, 2.0))]
