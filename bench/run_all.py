"""Run every benchmark script in bench/ one after another: ``make bench`` (or ``python -m bench.run_all``).

Each script is a module with a ``main()`` that runs the project AND its baseline in the same run and prints
a table with ratios. Their output is also kept in ``bench/results/<script>.txt``; docs/benchmarks.md (and the
README's headlines) quote it.
Each meets AWS's Kinesis quotas on its local server (``bench.common``) unless ``--no-quotas`` (passed on to every
benchmark that has a local Kinesis server behind quotas).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
NOT_BENCHMARKS = {
    "__init__",
    "run_all",
    "common",
    "first_batch",
    "timing_log",
    "soak_driver",
    "soak_gauges",
    "soak_plot",
    "soak_verdict",
    "standin",
    "sim_clock",
    "judge",
    "procfs",
    "query_cpu",
}
# No server, one they call directly, or the quotas themselves measured (see each one's doc): never --no-quotas.
NO_QUOTAS = {"efo_framing", "generator_render", "user_agent", "quotas", "quotas_write", "record_size_cost"}


def benchmark_names() -> list[str]:
    return sorted(p.stem for p in BENCH_DIR.glob("*.py") if p.stem not in NOT_BENCHMARKS)


def run(name: str, no_quotas: bool = False) -> int:
    RESULTS_DIR.mkdir(exist_ok=True)
    print(f"=== bench.{name}", flush=True)
    started = time.monotonic()
    flags = ["--no-quotas"] if no_quotas and name not in NO_QUOTAS else []
    process = subprocess.run(
        [sys.executable, "-m", f"bench.{name}", *flags], cwd=BENCH_DIR.parent, capture_output=True, text=True
    )
    output = process.stdout + (f"\n[stderr]\n{process.stderr[-4000:]}" if process.returncode else "")
    (RESULTS_DIR / f"{name}.txt").write_text(output)
    print(output, flush=True)
    print(f"=== bench.{name}: exit {process.returncode} after {time.monotonic() - started:.0f} s\n", flush=True)
    return process.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", help=f"benchmarks to run (default all: {', '.join(benchmark_names())})")
    parser.add_argument("--no-quotas", action="store_true", help="local servers without AWS's Kinesis quotas")
    args = parser.parse_args(argv)
    unknown = set(args.names) - set(benchmark_names())
    if unknown:
        parser.error(f"unknown benchmark(s) {sorted(unknown)}; known: {benchmark_names()}")
    failures = [name for name in args.names or benchmark_names() if run(name, args.no_quotas) != 0]
    if failures:
        print(f"failed: {failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
