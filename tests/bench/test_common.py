"""``bench.common``: the CPU of the benchmark's process group, by kind of process."""

from __future__ import annotations

import os
import subprocess
import sys

from bench.common import group_cpu_by_kind, process_kind

# Burns 0.3 CPU s, says so, then waits to be let go (a process's CPU counts while it lives).
BURN = (
    "import sys, time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"
    "print('burnt', flush=True)\nsys.stdin.read()"
)


def test_the_groups_cpu_is_told_apart_by_each_processs_command_line() -> None:
    # Stand-ins named as Spark names them: the source runner's module, a daemon's worker.
    named = {"runner": "python_streaming_source_runner", "worker": "pyspark.daemon"}
    before = group_cpu_by_kind()
    children = {
        role: subprocess.Popen([sys.executable, "-c", BURN, name], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        for role, name in named.items()
    }
    try:
        for child in children.values():
            assert child.stdout.readline() == b"burnt\n"
        kinds = {role: process_kind(child.pid) for role, child in children.items()}
        spent = group_cpu_by_kind() - before
    finally:
        for child in children.values():
            child.communicate(b"")
    assert kinds == {"runner": "the source runner (planning)", "worker": "Spark's Python workers"}
    assert all(spent[kind] >= 0.25 for kind in kinds.values())  # in clock ticks
    assert process_kind(os.getpid()).startswith("this process")
