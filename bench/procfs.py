"""Every live process's ``/proc/<pid>/stat``, for the benchmarks that measure processes from outside them.

Who calls it: ``bench.common.client_cpu_by_kind`` (CPU time of a benchmark's client side), ``bench.soak_gauges``
(the process tree below the driver), ``bench.driver_soak`` (the machine's other work beside it) and
``tests/cpu_log.py`` (the CPU of a test worker's tree); ``thread_cpu_s`` for ``bench.source_throughput`` (where
the Spark JVM's CPU goes, by thread).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path


def stat_fields() -> Iterator[tuple[int, list[str]]]:
    """(pid, the stat fields from the state on) of each live process: ``[0]`` state, ``[1]`` ppid, ``[2]`` pgrp,
    ``[11:15]`` utime, stime, cutime, cstime (proc(5) fields 3 on). The command name, which may hold spaces and
    parentheses, is cut at the last ")". A process that ends while it is read is left out."""
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (stat := _read_stat(entry.path)) is not None:
            yield int(entry.name), stat[1]


def _read_stat(folder: str) -> tuple[str, list[str]] | None:
    """(command name, the fields from the state on) of ``<folder>/stat``; None once the process or thread ended."""
    try:
        text = Path(folder, "stat").read_text()
    except OSError:
        return None
    name, fields = text.split("(", 1)[1].rsplit(")", 1)
    return name, fields.split()


def below(root: int, stats: dict[int, list[str]]) -> list[int]:
    """Every process below ``root`` in ``stats`` (``dict(stat_fields())``), from the parent links."""
    children: dict[int, list[int]] = {}
    for pid, fields in stats.items():
        children.setdefault(int(fields[1]), []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def cpu_s(fields: list[str]) -> float:
    """A process's CPU seconds from its stat fields: user and system, with what it has reaped."""
    return sum(int(ticks) for ticks in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def thread_cpu_s(pid: int) -> Iterator[tuple[str, float]]:
    """(name, CPU seconds) of each live thread of process ``pid`` (``/proc/<pid>/task``; a JVM names its threads,
    cut by the kernel at 15 characters): user and system time only, since every thread's stat repeats the reaped
    children's time of the whole process. A thread that has ended is not listed: its CPU stays in the process's."""
    for entry in os.scandir(f"/proc/{pid}/task"):
        if (stat := _read_stat(entry.path)) is not None:
            name, fields = stat
            yield name, sum(int(ticks) for ticks in fields[11:13]) / os.sysconf("SC_CLK_TCK")


def machine_cpu_s() -> tuple[float, float]:
    """(busy, steal) CPU seconds of the whole machine since boot, all cores (``/proc/stat``'s first line): busy is
    user, nice, system, irq and softirq; steal is time the hypervisor gave to other guests."""
    ticks = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks[:8]
    hz = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / hz, steal / hz
