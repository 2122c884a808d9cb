"""``bench.query_cpu``: the Spark JVM's CPU split by what its threads do, and the CPU of a query's batches after
its first, from the marks its listener takes."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest

from bench import query_cpu
from bench.query_cpu import ENDED, OTHER, CpuAtBatchEnds, jvm_by_thread


def test_each_thread_goes_to_its_kind_and_the_rest_of_the_jvm_to_ended_threads() -> None:
    threads = [
        ("C2 CompilerThre", 2.0),
        ("C1 CompilerThre", 0.5),
        ("GC Thread#0", 0.25),
        ("G1 Conc#0", 0.25),
        ("Executor task l", 3.0),
        ("Executor task i", 1.0),
        ("stream executio", 0.75),
        ("dispatcher-even", 0.125),
    ]
    split = jvm_by_thread(threads, jvm_total_s=10.0)
    assert split["JVM: JIT compiler"] == 2.5
    assert split["JVM: garbage collector"] == 0.5
    assert split["JVM: tasks (Arrow in, rows to the sink)"] == 4.0
    assert split["JVM: micro-batch thread (planning, logs)"] == 0.75
    assert split[OTHER] == 0.125
    assert split[ENDED] == pytest.approx(10.0 - 7.875)
    assert sum(split.values()) == pytest.approx(10.0)


def test_the_batches_after_the_first_are_the_difference_of_two_marks(monkeypatch: pytest.MonkeyPatch) -> None:
    readings = iter([Counter({"workers": 1.0, "jvm": 2.0}), Counter({"workers": 1.5, "jvm": 2.5}),
                     Counter({"workers": 2.5, "jvm": 3.0}), Counter({"workers": 2.0, "jvm": 9.0})])  # fmt: skip
    served = iter([0.5, 0.75, 1.5, 4.0])
    monkeypatch.setattr(query_cpu, "cpu_breakdown", lambda pid: next(readings))
    monkeypatch.setattr(query_cpu, "serving_cpu_s", lambda: next(served))
    listener = CpuAtBatchEnds(jvm_pid=1)
    for rows in (50, 30, 20, 10):
        listener.onQueryProgress(SimpleNamespace(progress=SimpleNamespace(numInputRows=rows)))
    rows, spent, proxies_s = listener.after_first()
    assert rows == 50  # the batches of 30 and 20: not the first, and not the last, read after the query ended
    assert spent == Counter({"workers": 1.5, "jvm": 1.0})
    assert proxies_s == 1.0


def test_a_query_of_two_batches_has_none_between_its_first_and_last() -> None:
    listener = CpuAtBatchEnds(jvm_pid=1)
    listener.marks += [(10, Counter({"jvm": 1.0}), 0.0), (10, Counter({"jvm": 2.0}), 0.0)]
    with pytest.raises(ValueError, match="ran 2 batches"):
        listener.after_first()
