"""Live counters of a generator run, shared by the sending threads and the progress display, and the final
``Summary`` that ``generator.run`` returns and the CLI prints (or dumps as JSON with ``--json``)."""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field

from connector.sink.put_records import PutStats


@dataclass
class Summary:
    """What a run did. ``records`` counts user records stored (several per Kinesis record when aggregating)."""

    records: int
    kinesis_records: int
    bytes: int
    calls: int
    retried_entries: int
    retried_calls: int
    failed: int
    elapsed_s: float
    rate: float
    bytes_per_s: float
    target: str
    interrupted: bool = False
    sent_records: list[tuple[str, bytes]] | None = field(default=None, repr=False)

    @property
    def retried(self) -> int:
        """Entries and whole calls sent again."""
        return self.retried_entries + self.retried_calls

    def as_dict(self) -> dict[str, object]:
        """JSON-ready, without the sent records."""
        data = asdict(self)
        data.pop("sent_records")
        return data

    def lines(self) -> list[str]:
        """Human-readable summary for the CLI."""
        status = "interrupted" if self.interrupted else "done"
        return [
            f"{status}: {self.records} records ({self.kinesis_records} Kinesis records, {self.bytes} bytes) "
            f"in {self.elapsed_s:.1f} s, target {self.target}",
            f"rate: {self.rate:,.1f} records/s, {self.bytes_per_s:,.0f} bytes/s",
            f"PutRecords calls: {self.calls}; retried: {self.retried_entries} entries, {self.retried_calls} calls; "
            f"failed: {self.failed}",
        ]


class LiveStats:
    """Thread-safe totals, updated by each sending thread after each PutRecords batch."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.put = PutStats()
        self.records = 0  # user records stored
        self.failed_records = 0  # user records given up on
        self.started = time.monotonic()

    def add(self, stats: PutStats, stored_user_records: int, failed_user_records: int) -> None:
        with self._lock:
            self.put += stats
            self.records += stored_user_records
            self.failed_records += failed_user_records

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def summary(self, target: str, interrupted: bool, sent: list[tuple[str, bytes]] | None) -> Summary:
        with self._lock:
            elapsed = max(self.elapsed_s(), 1e-9)
            return Summary(
                records=self.records,
                kinesis_records=self.put.records,
                bytes=self.put.bytes,
                calls=self.put.calls,
                retried_entries=self.put.retried_entries,
                retried_calls=self.put.retried_calls,
                failed=self.failed_records,
                elapsed_s=round(elapsed, 3),
                rate=self.records / elapsed,
                bytes_per_s=self.put.bytes / elapsed,
                target=target,
                interrupted=interrupted,
                sent_records=sent,
            )
