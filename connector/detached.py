"""Helper processes that outlive the process group that starts them.

Who calls it: ``consumers`` (the deregistration watcher) and ``fetch.fanout.client`` (the subscription broker). Spark
kills a Python worker's or a source runner's whole process group, so these run in a session of their own. Their
stdout/stderr are not the starter's (Spark may wait for those to end); each logs to a file of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import IO, Any

# The package's parent by its import name (abspath, not realpath: the link at the checkout's root), on the helper's
# PYTHONPATH so that a connector shipped with --py-files is importable there too.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def spawn_detached(module: str, *args: str, stdin: int | IO[Any] = subprocess.DEVNULL) -> subprocess.Popen:
    """``python -m <module> <args>`` in its own session, with this checkout of the connector importable."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [_ROOT, os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen(
        [sys.executable, "-m", module, *args],
        stdin=stdin,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
