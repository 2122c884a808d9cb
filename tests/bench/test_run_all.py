"""``bench.run_all`` runs every benchmark and nothing else: each module it runs has a ``__main__`` entry, so a
new helper module must join the list of what it leaves out."""

from __future__ import annotations

from bench.run_all import BENCH_DIR, benchmark_names


def _runnable(name: str) -> bool:
    return 'if __name__ == "__main__":' in (BENCH_DIR / f"{name}.py").read_text()


def test_every_module_run_all_runs_has_a_main_entry() -> None:
    names = benchmark_names()
    assert "source_throughput" in names and "soak" in names
    assert [name for name in names if not _runnable(name)] == []
