"""Executor side: read ONE shard from a start position with GetShardIterator + GetRecords, until a stop condition.

Who calls it: the source's ``read()`` (on an executor, once per shard of the input partition) and the batch
reader. It yields Arrow RecordBatches (one per non-empty GetRecords answer) and, once exhausted, leaves in
``result`` a ``ShardRead`` saying where it stopped and why, which the caller records in the metadata store.

Stop conditions, in order of precedence:
- ``replay``: a batch that runs again stops exactly after the recorded last record (or returns nothing when the
  first run returned nothing), ignoring every limit: exact replay. ``until`` (batch reads with an explicit end)
  stops the same way but without requiring the record to exist;
- the end of a closed shard (GetRecords answers without NextShardIterator);
- ``max_records`` user records returned (may stop inside a KPL aggregate: the position keeps the sub-sequence);
- ``stop_after_ms``: the first record that arrived after this time (the batch's planning time: a batch reads
  what had arrived when it was planned, so a steady producer cannot keep a read going);
- caught up: an empty answer with MillisBehindLatest 0;
- ``max_time_s`` spent (not during a replay).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from botocore.exceptions import ClientError

from connector.aws import RAW_BODY
from connector.decode import Page, ShardContext, decode_get_records
from connector.fetch.iterators import PositionGoneError, ShardGoneError, data_loss, open_iterator
from connector.metadata.store import (
    STOP_BOUND,
    STOP_CAUGHT_UP,
    STOP_END,
    STOP_LIMIT,
    STOP_SHARD_END,
    STOP_TIME,
    ShardRead,
)
from connector.offsets import AFTER_SEQUENCE_NUMBER, AT_SEQUENCE_NUMBER, TRIM_HORIZON, WHOLE_RECORD, Position
from connector.retry import RetryPolicy


class ReplayError(RuntimeError):
    """A batch that runs again could not reach the record its first run stopped at (records trimmed or lost)."""


@dataclass(frozen=True)
class ShardTask:
    """One shard to read in one batch: which shard, its hash-key range, where to start, and its own record cap."""

    stream: str
    shard_id: str
    starting_hash_key: int
    ending_hash_key: int
    start: Position
    max_records: int | None = None  # this batch's share of kinesis.maxRecordsPerTrigger, if any


@dataclass(frozen=True)
class FetchLimits:
    """How much one read of one shard may take (see the module doc for precedence)."""

    max_records: int | None = None
    max_time_s: float | None = None
    records_per_call: int = 10000
    fetch_interval_s: float = 0.2
    stop_after_ms: int | None = None


def skipped_rows(position: Position, page: Page, start: int = 0) -> int:
    """Index of the first row at or after ``start`` that ``position`` does not exclude.

    Only rows of the record a position points at can be excluded (an AT/AFTER position inside a KPL aggregate
    re-reads the whole record), and that record is the first of the first answer after the iterator was opened.
    """
    if position.kind not in (AT_SEQUENCE_NUMBER, AFTER_SEQUENCE_NUMBER):
        return start
    index = start
    while index < len(page) and page.sequences[index] == position.sequence_number:
        sub = page.subs[index]
        if position.kind == AT_SEQUENCE_NUMBER and sub >= position.sub_sequence_number:
            break
        if (
            position.kind == AFTER_SEQUENCE_NUMBER
            and position.sub_sequence_number != WHOLE_RECORD
            and sub > position.sub_sequence_number
        ):
            break
        index += 1
    return index


class ShardFetcher:
    """Reads one ShardTask; iterate ``batches()`` to the end, then read ``result``."""

    def __init__(
        self,
        kinesis: Any,
        task: ShardTask,
        limits: FetchLimits,
        retry: RetryPolicy,
        context: ShardContext,
        replay: ShardRead | None = None,
        until: tuple[str, int] | None = None,
        fail_on_data_loss: bool = False,
    ):
        self.kinesis = kinesis
        self.task = task
        self.limits = limits
        self.retry = retry
        self.context = context
        self.replay = replay
        self.until = until  # (sequence number, sub-sequence number) of the last record to return, inclusive
        self.fail_on_data_loss = fail_on_data_loss
        self.result: ShardRead | None = None
        self._count = 0
        self._last: tuple[str, int, bool] | None = None  # sequence, sub-sequence, last of its Kinesis record
        self._behind: int | None = None
        self._from = task.start  # the position of the current iterator: rows before it are skipped
        self._start = task.start  # where reading really started (TRIM_HORIZON after lost data)

    @property
    def _what(self) -> str:
        return f"stream '{self.task.stream}' shard {self.task.shard_id}"

    @property
    def _max_records(self) -> int | None:
        caps = [cap for cap in (self.limits.max_records, self.task.max_records) if cap is not None]
        return min(caps) if caps else None

    def batches(self) -> Iterator[pa.RecordBatch]:
        """RecordBatches of the shard's records from the start position to the first stop condition."""
        if self.replay is not None and self.replay.records == 0:
            self.result = self.replay  # the first run returned nothing: so does this one, without asking AWS
            return
        stop = yield from self._read()
        self._finish(stop)

    def _read(self) -> Iterator[pa.RecordBatch]:
        """Yields batches; returns why reading stopped (a ``STOP_*``)."""
        deadline = None
        if self.limits.max_time_s is not None and self.replay is None:
            deadline = time.monotonic() + self.limits.max_time_s
        iterator = self._open_start()
        if iterator is None:
            return STOP_SHARD_END
        while True:
            page = self._get_records(iterator)
            if page is None:  # the iterator expired: get a new one where we are
                iterator = self._open(self._position())
                continue
            self._behind = page.millis_behind_latest
            start, stop_at, stop = self._cut(page)
            if stop_at > start:
                yield page.to_batch(self.context, start, stop_at)
                self._took(page, start, stop_at)
            if stop is not None:
                return stop
            if page.next_iterator is None:
                self._check_replay_reached(at_shard_end=True)
                return STOP_SHARD_END
            if page.caught_up:
                self._check_replay_reached(at_shard_end=False)
                return STOP_CAUGHT_UP
            if deadline is not None and time.monotonic() >= deadline:
                return STOP_TIME
            iterator = page.next_iterator
            if self.limits.fetch_interval_s:
                time.sleep(self.limits.fetch_interval_s)

    def _cut(self, page: Page) -> tuple[int, int, str | None]:
        """Which rows of ``page`` to return (``start:stop_at``) and the stop condition met inside it, if any."""
        start = skipped_rows(self._from, page)
        stop_at, stop = len(page), None
        until = self._until()
        if until is not None:
            after = page.first_after(*until, start)
            if after < len(page) or (after > start and (page.sequences[after - 1], page.subs[after - 1]) == until):
                return start, after, STOP_END
            return start, after, None
        if self.limits.stop_after_ms is not None:
            late = page.first_arrival_after(self.limits.stop_after_ms, start)
            if late < stop_at:
                stop_at, stop = late, STOP_BOUND
        cap = self._max_records
        if cap is not None:
            limit_at = start + cap - self._count
            if limit_at < stop_at or (limit_at == stop_at and stop is None):
                stop_at, stop = limit_at, STOP_LIMIT
        return start, stop_at, stop

    def _took(self, page: Page, start: int, stop_at: int) -> None:
        self._count += stop_at - start
        last = stop_at - 1
        self._last = (page.sequences[last], page.subs[last], page.record_ends[last])

    def _until(self) -> tuple[str, int] | None:
        """The last record to return when the range has a fixed end (a replay, or a batch read's end)."""
        if self.replay is not None and self.replay.last_sequence_number is not None:
            return self.replay.last_sequence_number, self.replay.last_sub_sequence_number
        return self.until

    def _check_replay_reached(self, at_shard_end: bool) -> None:
        if self.replay is not None and self.replay.last_sequence_number is not None:
            target = f"{self.replay.last_sequence_number}/{self.replay.last_sub_sequence_number}"
            raise ReplayError(
                f"replaying a batch of {self._what}: reached the {'shard end' if at_shard_end else 'tip'} after "
                f"{self._count} records without meeting record {target} where the first run stopped after "
                f"{self.replay.records} records (were records trimmed?)"
            )

    def _position(self) -> Position:
        """Where reading continues from now (after the last returned record, else the current start)."""
        if self._last is None:
            return self._from
        sequence, sub, complete = self._last
        return Position(AFTER_SEQUENCE_NUMBER, sequence, WHOLE_RECORD if complete else sub)

    def _finish(self, stop: str) -> None:
        sequence, sub, complete = self._last if self._last else (None, WHOLE_RECORD, True)
        self.result = ShardRead(
            stream=self.task.stream,
            shard_id=self.task.shard_id,
            start=self._start,
            records=self._count,
            last_sequence_number=sequence,
            last_sub_sequence_number=sub,
            last_complete=complete,
            shard_end=stop == STOP_SHARD_END,
            millis_behind_latest=self._behind,
            stop=stop,
        )
        if self.replay is not None:
            if self._count != self.replay.records:
                raise ReplayError(
                    f"replaying a batch of {self._what} returned {self._count} records where its first run "
                    f"returned {self.replay.records} (were records trimmed?)"
                )
            # Same records up to the same last one: keep the record (its shard end, millisBehindLatest).
            self.result = self.replay

    # -- AWS calls --

    def _open_start(self) -> str | None:
        """The first iterator; on lost data, fail or go on from the oldest record (None: the shard is gone)."""
        try:
            return self._open(self.task.start)
        except (PositionGoneError, ShardGoneError) as gone:
            if isinstance(gone, ShardGoneError):
                data_loss(self._what, self.task.start, gone, self.fail_on_data_loss, "the shard's children")
                return None
            data_loss(self._what, self.task.start, gone, self.fail_on_data_loss, "the oldest record still there")
            self._start = Position(TRIM_HORIZON)
            return self._open(self._start)

    def _open(self, position: Position) -> str:
        self._from = position
        return open_iterator(self.kinesis, self.task.stream, self.task.shard_id, position, self.retry, self._what)

    def _get_records(self, iterator: str) -> Page | None:
        """One GetRecords answer, decoded; None when the iterator expired."""
        limit = self.limits.records_per_call
        cap = self._max_records
        if cap is not None and self._until() is None:  # fetch no more than the cap lets us return
            limit = max(1, min(limit, cap - self._count))
        try:
            answer = self.retry.call(
                self.kinesis.get_records,
                ShardIterator=iterator,
                Limit=limit,
                what=f"GetRecords on {self._what}",
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ExpiredIteratorException":
                return None
            raise
        return decode_get_records(answer[RAW_BODY], self.context)


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch (UTC)."""
    return int(datetime.now(UTC).timestamp() * 1000)
