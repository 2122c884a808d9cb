"""Rendering rate of the KDG seed template on one core: our compiled template against a naive renderer.

Run: ``.venv/bin/python -m bench.generator_render [--records N]``. Target (not asserted): >= 100,000 records/s.

The baseline does what a straightforward port of the KDG does for each record: find the placeholders with a
regular expression, parse each one's JSON arguments and dispatch on the helper name, every time. Ours parses
and compiles once (``kinesis_generator.Template``) and renders with one closure. Both produce bytes, as sent.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import time
from datetime import datetime

from kinesis_generator import Template, seed_template

PLACEHOLDER = re.compile(r"\{\{\s*([\w.]+)(?:\((.*?)\))?\s*\}\}")


def naive_render(source: str) -> str:
    """Re-parse the template for each record (the baseline)."""

    def fill(match: re.Match[str]) -> str:
        name, raw = match.group(1), match.group(2)
        args = json.loads(raw) if raw else None
        if name == "random.number":
            return str(random.randint(0, args))
        if name == "random.arrayElement":
            return str(random.choice(args))
        if name == "date.now":
            return datetime.now().strftime("%Y-%m-%d %I:%M:%S")
        raise ValueError(name)

    return PLACEHOLDER.sub(fill, source)


def rate(render, records: int) -> float:
    started = time.perf_counter()
    for _ in range(records):
        render()
    return records / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=300_000)
    args = parser.parse_args(argv)
    source = seed_template()
    template = Template(source)
    ours = max(rate(template.render_bytes, args.records) for _ in range(3))
    naive = max(rate(lambda: naive_render(source).encode(), args.records // 5) for _ in range(3))
    print(f"seed template, one core, best of 3 ({args.records:,} renders for ours)")
    print(f"{'renderer':<28}{'records/s':>14}{'ratio':>9}")
    print(f"{'naive (parse per record)':<28}{naive:>14,.0f}{1:>9.2f}")
    print(f"{'kinesis_generator.Template':<28}{ours:>14,.0f}{ours / naive:>9.2f}")
    print(f"target >= 100,000 records/s: {'met' if ours >= 100_000 else 'NOT met'}")


if __name__ == "__main__":
    main()
