"""Where a Spark query's CPU goes: the client side's processes by kind (``common.client_cpu_by_kind``) with the
Spark JVM's share split by what its threads do, read after each micro-batch.

Who calls it: ``bench.source_throughput`` (the warm query's CPU per GiB, by part). Not a benchmark itself (run_all
skips it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

from bench import procfs
from bench.common import client_cpu_by_kind
from localaws.fault_proxy import serving_cpu_s

JVM = "the Spark JVM"
JIT = "JVM: JIT compiler"
# The start of a JVM thread's name (the kernel keeps 15 characters) -> what it does.
JVM_THREADS = (
    ("C1 CompilerThre", JIT),
    ("C2 CompilerThre", JIT),
    ("GC Thread", "JVM: garbage collector"),
    ("G1 ", "JVM: garbage collector"),
    ("VM Thread", "JVM: garbage collector"),  # the serial and parallel collectors' pauses run here
    ("Executor task", "JVM: tasks (Arrow in, rows to the sink)"),
    ("stream executio", "JVM: micro-batch thread (planning, logs)"),
)
ENDED = "JVM: ended threads, reaped child processes"
OTHER = "JVM: other threads"


def jvm_by_thread(threads: Iterable[tuple[str, float]], jvm_total_s: float) -> Counter[str]:
    """The JVM's CPU seconds by ``JVM_THREADS`` kind; what its live threads do not hold went to ended threads."""
    split = Counter[str]()
    for name, seconds in threads:
        split[next((kind for start, kind in JVM_THREADS if name.startswith(start)), OTHER)] += seconds
    split[ENDED] = jvm_total_s - sum(split.values())
    return split


def cpu_breakdown(jvm_pid: int) -> Counter[str]:
    """CPU seconds so far of the client side by kind of process, the Spark JVM split by ``jvm_by_thread``."""
    spent = client_cpu_by_kind()
    jvm_total = spent.pop(JVM, 0.0)
    return spent + jvm_by_thread(procfs.thread_cpu_s(jvm_pid), jvm_total) if jvm_total else spent


class CpuAtBatchEnds(StreamingQueryListener):
    """``marks``: (rows, ``cpu_breakdown``, the proxies' ``serving_cpu_s``) when each micro-batch's progress reaches
    the driver (Spark posts it once the batch is committed), so that the CPU of chosen batches is the difference of
    two marks."""

    def __init__(self, jvm_pid: int) -> None:
        self.jvm_pid = jvm_pid
        self.marks: list[tuple[int, Counter[str], float]] = []

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        self.marks.append((event.progress.numInputRows, cpu_breakdown(self.jvm_pid), serving_cpu_s()))

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass

    def after_first(self) -> tuple[int, Counter[str], float]:
        """Rows, CPU seconds by part and the proxies' CPU seconds of the batches after the first and before the
        last: the last batch's mark can come after the query ended, its thread and source runner gone from what is
        read."""
        if len(self.marks) < 3:
            raise ValueError(f"the query ran {len(self.marks)} batches: none between its first and its last")
        rows = sum(rows for rows, _, _ in self.marks[1:-1])
        spent = Counter(self.marks[-2][1])
        spent.subtract(self.marks[0][1])
        return rows, spent, self.marks[-2][2] - self.marks[0][2]
