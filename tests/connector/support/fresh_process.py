"""What a fresh Python process imports: runs code in a fresh interpreter, as Spark starts its processes."""

from __future__ import annotations

import json
import subprocess
import sys

from localaws.servers import project_root


def fresh_modules(code: str) -> tuple[str, set[str]]:
    """Run ``code`` in a fresh interpreter; what it printed last (``meta``) and every module it had imported."""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=project_root()
    ).stdout
    answer = json.loads(out.splitlines()[-1])
    return answer["meta"], set(answer["modules"])
