"""The sending threads: PutRecords batches from a bounded queue, put with
``pyspark_aws_kinesis.sink.put_records.put_all``.

Who calls it: ``kinesis_generator.sender.run`` makes one ``SenderPool`` per run, ``submit``s each tick's records and
``close``s it at the end. ``put_all`` retries exactly the refused entries, when the shard has room again (each
thread keeps one ``pyspark_aws_kinesis.sink.pacing.WritePacer`` across its batches, pacing each shard the run listed
on its own, so its budgets and the timing of its calls carry over from batch to batch), or after a jittered
backoff; its retry policy is a
``kinesis_generator.deadline.DeadlineRetry``, so no call (first or retry) starts after the run's deadline.
Which user records got stored is known entry by entry (``put_all``'s ``on_stored``), so the counts are exact
even when a batch was cut short; so is which were in a call that failed without an answer (``on_unanswered``):
those are unconfirmed if never stored after, and may be in the stream twice if they were.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kinesis_generator.deadline import DeadlineReached, DeadlineRetry
from kinesis_generator.stats import LiveStats
from pyspark_aws_kinesis.retry import RETRYABLE_ERROR_CODES
from pyspark_aws_kinesis.sink.entries import DEFAULT_LIMITS, Entry, RecordLimits, batches
from pyspark_aws_kinesis.sink.pacing import WritePacer
from pyspark_aws_kinesis.sink.put_records import PutRecordsFailedError, PutStats, put_all
from pyspark_aws_kinesis.sink.shard_queues import BucketOf

UserRecord = tuple[str, bytes]  # (partition key, data)
OnSent = Callable[[list[UserRecord]], None]
POLL_S = 0.05  # how often a blocked producer or an idle sender looks at the deadline and the end of the run


@dataclass(eq=False)
class Job:
    """One PutRecords batch: its entries, the user records each carries (several when aggregated), and live
    counters the progress display reads while it is under way."""

    entries: list[Entry]
    owners: list[list[UserRecord]]
    put: PutStats = field(default_factory=PutStats)
    stored_users: list[UserRecord] = field(default_factory=list)  # stored so far
    _users: dict[int, list[UserRecord]] = field(init=False)  # by id(entry)
    _stored: set[int] = field(default_factory=set)
    _unanswered: Counter[int] = field(default_factory=Counter)  # entry -> its calls that failed without an answer

    def __post_init__(self) -> None:
        self._users = {id(entry): users for entry, users in zip(self.entries, self.owners, strict=True)}

    @property
    def user_count(self) -> int:
        return sum(len(users) for users in self.owners)

    @property
    def stored(self) -> int:
        """User records stored so far."""
        return len(self.stored_users)

    def mark_stored(self, entry: Entry) -> None:
        self._stored.add(id(entry))
        self.stored_users.extend(self._users[id(entry)])

    def mark_unanswered(self, entries: list[Entry]) -> None:
        self._unanswered.update(id(entry) for entry in entries)

    def unconfirmed(self) -> list[UserRecord]:
        """Records of unanswered calls not stored since: in the stream or not."""
        return self._of(self._unanswered.keys() - self._stored)

    def stored_again(self) -> list[UserRecord]:
        """Records stored after a call of theirs went unanswered: in the stream more than once, maybe."""
        return self._of(self._unanswered.keys() & self._stored)

    def unfinished(self) -> list[UserRecord]:
        """Records not stored: of a job abandoned under way, any may be in a call still unanswered."""
        return self._of(self._users.keys() - self._stored)

    def extra_copies(self) -> list[UserRecord]:
        """The copies beyond ``stored_users`` that may be in the stream: one per unanswered call a record was in."""
        return [user for entry_id, calls in self._unanswered.items() for user in self._users[entry_id] * calls]

    def _of(self, ids: set[int]) -> list[UserRecord]:
        return [user for entry_id in ids for user in self._users[entry_id]]


class SenderPool:
    """``workers`` threads taking batches from a bounded queue (back-pressure on the producer) and putting them.

    ``fatal`` holds the first error no retry fixes (a missing stream, denied access, the caller's ``on_sent``
    failing); the run stops on it.
    """

    def __init__(
        self,
        kinesis: Any,
        stream: str,
        retry: DeadlineRetry,
        stats: LiveStats,
        workers: int,
        on_sent: OnSent | None,
        bucket_of: BucketOf | None = None,
        limits: RecordLimits = DEFAULT_LIMITS,
    ):
        self.kinesis, self.stream, self.retry, self.stats, self.on_sent = kinesis, stream, retry, stats, on_sent
        self.bucket_of = bucket_of  # the shard of each entry, when the stream's shards were listed
        self.limits = limits  # the stream's largest record and call
        self.deadline = retry.deadline
        self.fatal: BaseException | None = None
        self.submitted = 0  # user records queued
        self._queue: queue.Queue[Job] = queue.Queue(maxsize=workers * 2)
        self._closing = threading.Event()
        self._threads = [
            threading.Thread(target=self._work, name=f"generator-sender-{i}", daemon=True) for i in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, users: list[UserRecord], aggregated: list[tuple[Entry, list[UserRecord]]] | None) -> bool:
        """Queue the records as PutRecords batches; blocks while the senders are behind, until the deadline.

        False when the deadline came (or the run failed) first: the records not queued are not sent.
        """
        if aggregated is None:
            aggregated = [(Entry(data, pk), [(pk, data)]) for pk, data in users]
        owners = {id(entry): members for entry, members in aggregated}
        for batch in batches((entry for entry, _ in aggregated), self.limits):
            job = Job(batch, [owners[id(entry)] for entry in batch])
            while True:
                if self.fatal is not None or self.deadline.passed():
                    return False
                try:
                    self._queue.put(job, timeout=POLL_S)
                    break
                except queue.Full:
                    continue
            self.submitted += job.user_count
        return True

    def close(self, cutoff: float | None) -> None:
        """No more batches: let the senders finish (queued batches are dropped once the deadline has passed)
        and wait for them until ``cutoff`` (monotonic; None: as long as they take); then end the run's counts."""
        self._closing.set()
        try:
            for thread in self._threads:
                thread.join(None if cutoff is None else max(0.0, cutoff - time.monotonic()))
        finally:
            self.stats.close()  # a sender still under way is abandoned (a daemon thread; its results are ignored)

    def _work(self) -> None:
        pacer = WritePacer()  # this thread's calls: what the stream took from them in the last second
        while True:
            try:
                job = self._queue.get(timeout=POLL_S)
            except queue.Empty:
                if self._closing.is_set():
                    return
                continue
            # After the deadline or a fatal error, queued batches are not sent (their records count as unsent).
            if self.fatal is None and not self.deadline.passed() and self.stats.begin(job):
                self._send(job, pacer)

    def _send(self, job: Job, pacer: WritePacer) -> None:
        failed = 0
        try:
            put_all(
                self.kinesis,
                self.stream,
                job.entries,
                self.retry,
                job.put,
                lambda entry, _shard: job.mark_stored(entry),
                pacer,
                bucket_of=self.bucket_of,
                limits=self.limits,
                on_unanswered=job.mark_unanswered,
            )
        except DeadlineReached:
            pass  # the rest of the batch was not sent in time
        except PutRecordsFailedError as exc:
            if set(exc.error_codes) <= RETRYABLE_ERROR_CODES:
                # Refused through the whole retry budget: lost, but for those a call may have stored unanswered.
                failed = job.user_count - job.stored - len(job.unconfirmed())
            else:
                self.fatal = exc
        except Exception as exc:  # a client error no retry fixes (no credentials, a bad entry): stop the run
            self.fatal = exc
        if self.stats.end(job, failed) and job.stored_users and self.on_sent is not None:
            try:
                self.on_sent(job.stored_users)
            except Exception as exc:  # the caller's callback broke: stop the run with its error
                self.fatal = exc
