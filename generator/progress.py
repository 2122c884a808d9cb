"""The live progress bar (``rich``) on stderr: records, rate against the rate asked, bytes/s, refusals, failures,
and the run's clock.

Who calls it: ``kinesis_generator.sender.run`` when not quiet: ``start()`` when the schedule starts, ``stop()`` once the
run's counts are final. A thread of its own refreshes it five times a second, so it stays live while the
producer waits on busy senders and during the grace after the deadline. The clock is ``LiveStats.elapsed_s()``,
the one the summary reports.
"""

from __future__ import annotations

import threading

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn

from kinesis_generator.stats import LiveStats, refused_entries

REFRESH_S = 0.2


class ProgressBar:
    """A bar over the record count (``total_records``) or the duration (``total_s``), whichever bounds the run."""

    def __init__(self, stats: LiveStats, total_records: int | None, total_s: float | None, asked_per_s: float):
        self.stats = stats
        self.asked_per_s = asked_per_s
        self.by_time = total_records is None
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[line]}"),
            TextColumn("{task.fields[clock]}"),
            console=Console(stderr=True),
            transient=False,
        )
        self._total = (total_s if self.by_time else total_records) or 0
        self._task = self._progress.add_task("sending", total=self._total, line="", clock="")
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="generator-progress", daemon=True)

    def start(self) -> None:
        self._progress.start()
        self._ticker.start()

    def stop(self) -> None:
        """The last frame shows the final counts and the run's length, as the summary does."""
        self._stop.set()
        self._ticker.join()
        self.update()
        self._progress.stop()

    def _tick(self) -> None:
        while not self._stop.wait(REFRESH_S):
            self.update()

    def update(self) -> None:
        put, records, failed = self.stats.snapshot()
        elapsed = self.stats.elapsed_s()
        per_s = max(elapsed, 1e-9)
        line = (
            f"{records:,} rec  {records / per_s:,.0f}/{self.asked_per_s:,.0f} rec/s  "
            f"{put.bytes / per_s / 1024:,.0f} KiB/s  refused {refused_entries(put):,}  "
            f"failed {failed:,}"
        )
        completed = min(elapsed, self._total) if self.by_time else records
        self._progress.update(self._task, completed=completed, line=line, clock=f"{elapsed:.1f} s")
