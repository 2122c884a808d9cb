"""``bench.common``: the CPU of the benchmark's client side, by kind of process."""

from __future__ import annotations

import os
import subprocess
import sys

from bench.common import client_cpu_by_kind, process_kind

# Burns 0.3 CPU s, says so, then waits to be let go (a process's CPU counts while it lives). A "daemon" moves to a
# process group of its own first, as pyspark's daemon does.
BURN = (
    "import os, sys, time\n'daemon' in sys.argv[1] and os.setpgid(0, 0)\n"
    "end = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"
    "print('burnt', flush=True)\nsys.stdin.read()"
)


def _burn(name: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", BURN, name], stdin=subprocess.PIPE, stdout=subprocess.PIPE, **popen)


def test_the_client_sides_cpu_is_told_apart_by_command_line_and_leaves_the_servers_out() -> None:
    # Stand-ins named as Spark names them (the source runner's module, a daemon's worker), and a server.
    before = client_cpu_by_kind()
    children = {
        "runner": _burn("python_streaming_source_runner"),
        "worker": _burn("pyspark.daemon"),
        "server": _burn("a local server", start_new_session=True),
    }
    try:
        for child in children.values():
            assert child.stdout.readline() == b"burnt\n"
        kinds = {role: process_kind(children[role].pid) for role in ("runner", "worker")}
        spent = client_cpu_by_kind() - before
    finally:
        for child in children.values():
            child.communicate(b"")
    assert kinds == {"runner": "the source runner (planning)", "worker": "Spark's Python workers"}
    assert all(spent[kind] >= 0.25 for kind in kinds.values())  # in clock ticks
    assert spent["other"] < 0.25  # the server's session is not the client side
    assert process_kind(os.getpid()).startswith("this process")
