"""``bench.common``: the CPU of the benchmark's client side, by kind of process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from bench.common import THIS_PROCESS, client_cpu_by_kind, process_kind
from tests.localaws.burning_proxy import BurningProxy

ROOT = Path(__file__).resolve().parents[2]

# Burns 0.3 CPU s, says so, then waits to be let go (a process's CPU counts while it lives). A "daemon" moves to a
# process group of its own first, as pyspark's daemon does.
BURN = (
    "import os, sys, time\n'daemon' in sys.argv[1] and os.setpgid(0, 0)\n"
    "end = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"
    "print('burnt', flush=True)\nsys.stdin.read()"
)


def _burn(name: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", BURN, name], stdin=subprocess.PIPE, stdout=subprocess.PIPE, **popen)


def measure_kinds() -> dict:
    """Run in a session of its own (``_in_own_session``): its tree holds only the stand-ins below."""
    # Stand-ins named as Spark names them (the source runner's module, a daemon's worker), a server, and a proxy
    # in front of a server, in this process.
    before = client_cpu_by_kind()
    with BurningProxy() as proxy:
        proxy.get()
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
    return {"kinds": kinds, "spent": spent, "me": process_kind(os.getpid())}


def _in_own_session() -> dict:
    """``measure_kinds`` in a fresh process and session: a test's process may hold an earlier test's Spark
    workers, and one that ends between the two counts takes its CPU out of the difference."""
    script = "import json; from tests.bench.test_common import measure_kinds; print(json.dumps(measure_kinds()))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    answer = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, check=True, start_new_session=True
    )
    return json.loads(answer.stdout)


def test_the_client_sides_cpu_is_told_apart_by_command_line_and_leaves_the_servers_and_proxies_out() -> None:
    measured = _in_own_session()
    kinds, spent = measured["kinds"], Counter(measured["spent"])
    assert kinds == {"runner": "the source runner (planning)", "worker": "Spark's Python workers"}
    assert all(spent[kind] >= 0.25 for kind in kinds.values())  # in clock ticks
    assert spent["other"] < 0.25  # the server's session is not the client side
    assert spent[THIS_PROCESS] < 0.25  # nor is the proxy's 0.3 s, though in this process
    assert measured["me"] == THIS_PROCESS
