"""Live counters of a generator run, shared by the sending threads and the progress display, and the final
``Summary`` that ``kinesis_generator.run`` returns and the CLI prints (or dumps as JSON with ``--json``).

One clock: ``LiveStats.start()`` is the start of the schedule, ``finish()`` the end of the run; the progress
display and the summary both read ``elapsed_s()``, so they show the same time.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from kinesis_generator.deadline import SMALL_CALLS
from pyspark_aws_kinesis.sink.put_records import PutStats

if TYPE_CHECKING:
    from kinesis_generator.pool import Job, UserRecord

# What one open shard takes (Kinesis quotas): PutRecords beyond it is refused per entry with
# ProvisionedThroughputExceededException. An aggregate counts as one record.
SHARD_RECORDS_PER_S = 1000
SHARD_BYTES_PER_S = 1024 * 1024
# Waiting this share of the run for the shards' room means the stream, not the senders, held the rate.
HELD_BACK_SHARE = 0.05


def refused_entries(put: PutStats) -> int:
    """Entries the stream refused, each time: those sent again, and those given up on (``put_all`` counts a
    refused entry as retried before it waits, so a retry the deadline cut counts too)."""
    return put.retried_entries + put.failed_entries


@dataclass
class Summary:
    """What a run did. ``records`` counts user records stored (several per Kinesis record when aggregating).

    ``due``: the user records the run was to send (``--count``, or those the schedule had due before
    ``--duration`` ended; for an interrupted run, those due by Ctrl-C). Each of them ends up in exactly one of
    ``records`` (stored), ``failed`` (refused through the whole retry budget: lost), ``unsent`` (not stored when
    the run ended: never sent, or still being retried at the deadline) and ``unconfirmed`` (in a call that failed
    without an answer, or was still unanswered when the grace after the deadline ran out, and not stored since: in
    the stream or not). ``stored_again``: of ``records``, those stored by a call sent again after one that went
    unanswered; each may be in the stream more than once (Kinesis writes are at-least-once).
    ``sent_records`` / ``doubtful_records`` (with ``collect``): the records stored, and the copies beyond those
    that may be in the stream (a record once per unanswered call it was in).
    """

    records: int
    due: int
    kinesis_records: int
    bytes: int
    calls: int
    refused_entries: int
    retried_entries: int
    retried_calls: int
    failed: int
    unsent: int
    unconfirmed: int
    elapsed_s: float
    rate: float
    requested_rate: float
    bytes_per_s: float
    target: str
    open_shards: int | None
    interrupted: bool = False
    paced_s: float = 0.0  # time the senders held records back for the shards' write quota (summed over them)
    stored_again: int = 0
    grace_s: float = SMALL_CALLS.grace_s  # how long after the deadline calls under way could finish
    sent_records: list[tuple[str, bytes]] | None = field(default=None, repr=False)
    doubtful_records: list[tuple[str, bytes]] | None = field(default=None, repr=False)

    @property
    def retried(self) -> int:
        """Entries and whole calls sent again."""
        return self.retried_entries + self.retried_calls

    @property
    def complete(self) -> bool:
        """Every record due was stored."""
        return self.records >= self.due and not (self.failed or self.unsent or self.unconfirmed)

    @property
    def limit_records_per_s(self) -> int | None:
        """Records/s the stream's open shards take (None when they could not be listed)."""
        return None if self.open_shards is None else self.open_shards * SHARD_RECORDS_PER_S

    @property
    def limit_bytes_per_s(self) -> int | None:
        return None if self.open_shards is None else self.open_shards * SHARD_BYTES_PER_S

    def needed(self) -> tuple[float, float | None]:
        """Kinesis records/s and bytes/s the asked rate needs, as this run's stored records weighed (bytes
        unknown when none was stored; records then count one Kinesis record each)."""
        if not self.records:
            return self.requested_rate, None
        return (
            self.requested_rate * self.kinesis_records / self.records,
            self.requested_rate * self.bytes / self.records,
        )

    @property
    def held_back(self) -> bool:
        """Whether the senders spent a noticeable part of the run waiting for the shards' write quota."""
        return self.paced_s >= HELD_BACK_SHARE * self.elapsed_s

    @property
    def stream_too_small(self) -> bool | None:
        """Whether the asked rate is more than the stream's open shards take (None: shards unknown)."""
        if self.limit_records_per_s is None or self.limit_bytes_per_s is None:
            return None
        records_per_s, bytes_per_s = self.needed()
        return records_per_s > self.limit_records_per_s or (bytes_per_s or 0) > self.limit_bytes_per_s

    def as_dict(self) -> dict[str, object]:
        """JSON-ready, without the sent records, with the stream's write limit."""
        data = asdict(self)
        data.pop("sent_records")
        data.pop("doubtful_records")
        data["limit_records_per_s"] = self.limit_records_per_s
        data["limit_bytes_per_s"] = self.limit_bytes_per_s
        data["stream_too_small"] = self.stream_too_small
        return data

    def lines(self) -> list[str]:
        """Human-readable summary for the CLI."""
        status = "interrupted" if self.interrupted else "done" if self.complete else "incomplete"
        attempts = self.kinesis_records + self.refused_entries
        share = f" ({self.refused_entries / attempts:.0%} of the entries sent)" if self.refused_entries else ""
        lines = [
            f"{status}: {self.records} of {self.due} records stored ({self.kinesis_records} Kinesis records, "
            f"{self.bytes} bytes) in {self.elapsed_s:.1f} s, target {self.target}",
            f"rate: {self.rate:,.1f} records/s of {self.requested_rate:,.1f} asked, {self.bytes_per_s:,.0f} bytes/s; "
            f"{self._limit_text()}",
            f"PutRecords calls: {self.calls}; refused by the stream: {self.refused_entries} entries{share}; "
            f"retried: {self.retried_entries} entries, {self.retried_calls} calls",
            f"failed (given up after the retries): {self.failed}; not sent in time: {self.unsent}",
        ]
        if self.held_back:
            lines.append(
                f"held to the shards' write quota: the senders waited {self.paced_s:.1f} s for room "
                "(instead of having entries refused)"
            )
        if self.unconfirmed:
            lines.append(
                f"unconfirmed: {self.unconfirmed} records were in calls that went unanswered (or still were "
                f"{self.grace_s:g} s after the deadline): they may or may not be in the stream"
            )
        if self.stored_again:
            lines.append(
                f"stored again: {self.stored_again} records were sent again after a call of theirs went "
                "unanswered: each may be in the stream more than once"
            )
        return lines + self.verdicts()

    def _limit_text(self) -> str:
        if self.open_shards is None:
            return "the stream's write limit is unknown (its shards could not be listed)"
        shards = f"{self.open_shards} open shard" + (" takes" if self.open_shards == 1 else "s take")
        return f"the stream's {shards} {self.limit_records_per_s:,} records/s and {self.open_shards} MiB/s"

    def verdicts(self) -> list[str]:
        """Whether the stream is too small for the rate asked, and why records were refused, lost or late."""
        records_per_s, bytes_per_s = self.needed()
        asked = f"{records_per_s:,.0f} Kinesis records/s" + (
            f" (~{bytes_per_s / 1024:,.0f} KiB/s)" if bytes_per_s is not None else ""
        )
        refused = self.refused_entries or self.failed
        slow = (
            ["nothing was refused: the senders could not keep the rate (more --workers, --aggregate, or a faster link)"]
            if (self.unsent or self.unconfirmed)
            and not self.interrupted
            and not refused
            and not self.retried_calls
            and not self.held_back
            else []
        )
        if self.stream_too_small:
            shards = math.ceil(max(records_per_s / SHARD_RECORDS_PER_S, (bytes_per_s or 0) / SHARD_BYTES_PER_S))
            # Aggregation packs records, not bytes: it helps when the records/s are over and it is not on yet.
            aggregate = records_per_s > (self.limit_records_per_s or 0) and self.kinesis_records == self.records
            too_small = (
                f"the stream is too small for this rate: {asked} asked, more than its open shards take "
                f"(AWS refuses the excess): use {shards} shards or more, a lower --rate"
                + (", or --aggregate" if aggregate else "")
            )
            return [too_small, *slow]
        known = self.stream_too_small is False
        if refused:
            if not known:
                return [
                    "the stream refused entries; its write limit is unknown (its shards could not be listed): "
                    "the rate may be more than it takes"
                ]
            return [
                f"the stream refused entries although it takes the {asked} asked: partition keys crowding one "
                "shard, bursts, or other writers on the stream"
            ]
        if self.retried_calls:
            fits = f" (the stream takes the {asked} asked)" if known else ""
            return [f"{self.retried_calls} whole calls were throttled, failed or timed out and sent again{fits}"]
        return slow


class LiveStats:
    """Thread-safe totals, updated by each sending thread when a batch ends; batches under way count live."""

    def __init__(self, collect: bool = False) -> None:
        self._lock = threading.Lock()
        self.put = PutStats()  # finished batches
        self.records = 0  # user records stored, of finished batches
        self.failed_records = 0  # user records given up on
        self.unconfirmed = 0  # user records in unanswered calls, or in calls abandoned after the grace
        self.stored_again = 0  # user records stored after a call of theirs went unanswered
        self.doubtful: list[UserRecord] | None = [] if collect else None  # with collect: Summary.doubtful_records
        self.started: float | None = None
        self.ended: float | None = None
        self._active: set[Job] = set()
        self._closed = False

    def start(self) -> float:
        """The start of the schedule: the run's clock (and its deadline) count from here."""
        self.started = time.monotonic()
        return self.started

    def begin(self, job: Job) -> bool:
        """A sender starts ``job``; False once the run has ended (it must not be sent)."""
        with self._lock:
            if self._closed:
                return False
            self._active.add(job)
            return True

    def end(self, job: Job, failed_user_records: int) -> bool:
        """``job`` is done (its stored records are in ``job.stored``); False when the run ended without it."""
        with self._lock:
            if self._closed:
                return False
            self._active.discard(job)
            self.put += job.put
            self.records += job.stored
            self.failed_records += failed_user_records
            unconfirmed, stored_again = job.unconfirmed(), job.stored_again()
            self.unconfirmed += len(unconfirmed)
            self.stored_again += len(stored_again)
            if self.doubtful is not None:
                self.doubtful += job.extra_copies()
            return True

    def close(self) -> None:
        """The run is over: batches still under way are abandoned and their unanswered records unconfirmed."""
        with self._lock:
            self._closed = True
            for job in self._active:
                self.put += job.put
                self.records += job.stored
                unfinished, stored_again = job.unfinished(), job.stored_again()
                self.unconfirmed += len(unfinished)
                self.stored_again += len(stored_again)
                if self.doubtful is not None:
                    self.doubtful += unfinished + job.extra_copies()
            self._active.clear()
        if self.ended is None:
            self.ended = time.monotonic()

    def elapsed_s(self) -> float:
        """Seconds since the start of the schedule; once the run is over, its length (rounded to ms)."""
        if self.started is None:
            return 0.0
        if self.ended is not None:
            return round(self.ended - self.started, 3)
        return time.monotonic() - self.started

    def snapshot(self) -> tuple[PutStats, int, int]:
        """(PutStats, user records stored, user records failed) so far, batches under way included."""
        with self._lock:
            put, records = self.put + PutStats(), self.records
            for job in self._active:
                put += job.put
                records += job.stored
            return put, records, self.failed_records

    def summary(
        self,
        target: str,
        requested_rate: float,
        due: int,
        open_shards: int | None,
        interrupted: bool,
        sent=None,
        *,
        grace_s: float,
    ) -> Summary:
        """The Summary of a closed run."""
        put, records, failed = self.snapshot()
        elapsed = max(self.elapsed_s(), 1e-9)
        return Summary(
            records=records,
            due=due,
            kinesis_records=put.records,
            bytes=put.bytes,
            calls=put.calls,
            refused_entries=refused_entries(put),
            retried_entries=put.retried_entries,
            retried_calls=put.retried_calls,
            failed=failed,
            unsent=max(0, due - records - failed - self.unconfirmed),
            unconfirmed=self.unconfirmed,
            elapsed_s=elapsed,
            rate=records / elapsed,
            requested_rate=requested_rate,
            bytes_per_s=put.bytes / elapsed,
            target=target,
            open_shards=open_shards,
            interrupted=interrupted,
            paced_s=put.paced_s,
            stored_again=self.stored_again,
            grace_s=grace_s,
            sent_records=sent,
            doubtful_records=self.doubtful,
        )
