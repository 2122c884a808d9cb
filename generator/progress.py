"""The live progress bar (``rich``) on stderr: records, records/s, bytes/s, retries and failures.

Who calls it: ``generator.sender.run`` when not quiet; it calls ``update()`` from its loop a few times a second.
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from generator.stats import LiveStats


class ProgressBar:
    """A bar over the record count (``total_records``) or the duration (``total_s``), whichever bounds the run."""

    def __init__(self, stats: LiveStats, total_records: int | None, total_s: float | None):
        self.stats = stats
        self.by_time = total_records is None
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[line]}"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        total = total_s if self.by_time else total_records
        self._task = self._progress.add_task("sending", total=total, line="")

    def __enter__(self) -> ProgressBar:
        self._progress.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.update()
        self._progress.stop()

    def update(self) -> None:
        s = self.stats
        elapsed = max(s.elapsed_s(), 1e-9)
        line = (
            f"{s.records:,} rec  {s.records / elapsed:,.0f} rec/s  {s.put.bytes / elapsed / 1024:,.0f} KiB/s  "
            f"retried {s.put.retried_entries + s.put.retried_calls}  failed {s.failed_records}"
        )
        self._progress.update(self._task, completed=elapsed if self.by_time else s.records, line=line)
