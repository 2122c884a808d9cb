"""Lines of the project's Makefile, for tests that run a recipe's own line (the venvs' start-up hooks)."""

from __future__ import annotations

import re
from pathlib import Path

MAKEFILE = Path(__file__).resolve().parents[2] / "Makefile"


def recipe_line(target: str, marker: str, variable: str, **fill: str) -> str:
    """The one line of ``target``'s recipe that holds ``marker``, with ``$(variable)`` set to its value in the
    Makefile and each key of ``fill`` (``"$(PY)"``, ``"$*"``) replaced by its value."""
    makefile = MAKEFILE.read_text()
    (value,) = re.findall(rf"^{variable} := (.+)$", makefile, re.MULTILINE)
    recipe = makefile[makefile.index(f"{target}:") :].split("\n\n")[0]
    lines = [line.strip() for line in recipe.splitlines() if marker in line]
    assert len(lines) == 1, f"the {target} recipe writes {marker} once"
    line = lines[0].replace(f"$({variable})", value)
    for placeholder, text in fill.items():
        line = line.replace(placeholder, text)
    assert "$(" not in line and "$*" not in line, line
    return line
