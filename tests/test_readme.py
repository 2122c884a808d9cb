"""The README's shape, for pytest: at most 160 non-empty lines, opening with what the project does, then its Mermaid
diagram, the two commands (``make demo``, ``make test``), a PySpark example and the headline results, whose table
holds figures with a short clause each (the narrative is docs/benchmarks.md's)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
MAX_LINES = 160
MAX_RESULT_CELL = 90  # characters: a figure and a short clause


def test_at_most_160_non_empty_lines() -> None:
    lines = [line for line in README.splitlines() if line.strip()]
    assert len(lines) <= MAX_LINES, f"{len(lines)} non-empty lines"


def test_what_it_does_then_diagram_commands_example_results() -> None:
    first_paragraph = README.split("\n\n")[1]
    assert "source and sink for PySpark" in first_paragraph
    order = ["```mermaid", "make demo", "make test", "```python", "## Results", "| benchmark |"]
    positions = [README.index(marker) for marker in order]
    assert positions == sorted(positions), dict(zip(order, positions, strict=True))


def test_the_results_table_is_figures_with_short_clauses() -> None:
    table = README[README.index("## Results") :].split("\n\n")[2].splitlines()
    rows = [line for line in table if line.startswith("|")][2:]
    assert len(rows) >= 8
    long_cells = [cell.strip() for row in rows for cell in row.strip("|").split("|") if len(cell) > MAX_RESULT_CELL]
    assert not long_cells, long_cells
    assert all("**" in row.strip("|").split("|")[2] for row in rows), "each row's figure in bold"
