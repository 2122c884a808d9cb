"""Executor side: read ONE shard from a start position with GetShardIterator + GetRecords, until a stop condition.

Who calls it: the source's ``read()`` (on an executor, once per shard of the input partition). It yields Arrow
RecordBatches (one per non-empty GetRecords answer) and, once exhausted, leaves in ``result`` a ``ShardRead``
saying where it stopped, which the caller records in the metadata store.

Stop conditions, in order of precedence:
- ``replay``: a batch that runs again stops exactly after the recorded last record (or returns nothing when the
  first run returned nothing), ignoring every limit: exact replay. ``until`` (batch reads with an explicit end)
  stops the same way but without requiring the record to exist;
- the end of a closed shard (GetRecords answers without NextShardIterator);
- ``max_records`` user records returned (may stop inside a KPL aggregate: the position keeps the sub-sequence);
- ``stop_after_ms``: the first record that arrived after this time (batch reads: "the tip at planning time");
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

from connector.decode import BatchBuilder, ShardContext, UserRow, user_rows
from connector.metadata.store import ShardRead
from connector.offsets import (
    AFTER_SEQUENCE_NUMBER,
    AT_SEQUENCE_NUMBER,
    AT_TIMESTAMP,
    SHARD_END,
    WHOLE_RECORD,
    Position,
)
from connector.retry import RetryPolicy


class ReplayError(RuntimeError):
    """A batch that runs again could not reach the record its first run stopped at (records trimmed or lost)."""


@dataclass(frozen=True)
class ShardTask:
    """One shard to read in one batch: which shard, its hash-key range and where to start."""

    stream: str
    shard_id: str
    starting_hash_key: int
    ending_hash_key: int
    start: Position


@dataclass(frozen=True)
class FetchLimits:
    """How much one read of one shard may take (see the module doc for precedence)."""

    max_records: int | None = None
    max_time_s: float | None = None
    records_per_call: int = 10000
    fetch_interval_s: float = 0.2
    stop_after_ms: int | None = None


def iterator_request(position: Position) -> dict[str, Any]:
    """GetShardIterator arguments for a position (AT/AFTER inside an aggregate re-read the record and skip)."""
    if position.kind == AT_TIMESTAMP:
        assert position.timestamp_ms is not None
        return {"ShardIteratorType": AT_TIMESTAMP, "Timestamp": position.timestamp_ms / 1000.0}
    if position.kind == AFTER_SEQUENCE_NUMBER and position.sub_sequence_number == WHOLE_RECORD:
        return {"ShardIteratorType": AFTER_SEQUENCE_NUMBER, "StartingSequenceNumber": position.sequence_number}
    if position.kind in (AT_SEQUENCE_NUMBER, AFTER_SEQUENCE_NUMBER):
        return {"ShardIteratorType": AT_SEQUENCE_NUMBER, "StartingSequenceNumber": position.sequence_number}
    if position.kind == SHARD_END:
        raise ValueError("a finished shard (SHARD_END) has nothing to read")
    return {"ShardIteratorType": position.kind}


def skips(position: Position, row: UserRow) -> bool:
    """True for user records before ``position`` inside the record it points at."""
    if row.sequence_number != position.sequence_number:
        return False
    if position.kind == AT_SEQUENCE_NUMBER:
        return row.sub_sequence_number < position.sub_sequence_number
    if position.kind == AFTER_SEQUENCE_NUMBER:
        return position.sub_sequence_number == WHOLE_RECORD or row.sub_sequence_number <= position.sub_sequence_number
    return False


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
        until: tuple[int, int] | None = None,
    ):
        self.kinesis = kinesis
        self.task = task
        self.limits = limits
        self.retry = retry
        self.context = context
        self.replay = replay
        self.until = until  # (sequence number, sub-sequence number) of the last record to return, inclusive
        self.result: ShardRead | None = None
        self._count = 0
        self._last: UserRow | None = None
        self._last_complete = True
        self._behind: int | None = None
        self._calls = 0
        self._from = task.start  # the position of the current iterator: records before it are skipped

    @property
    def _what(self) -> str:
        return f"stream '{self.task.stream}' shard {self.task.shard_id}"

    def batches(self) -> Iterator[pa.RecordBatch]:
        """RecordBatches of the shard's records from the start position to the first stop condition."""
        if self.replay is not None and self.replay.records == 0:
            self.result = self.replay  # the first run returned nothing: so does this one, without asking AWS
            return
        shard_end = yield from self._read()
        self._finish(shard_end)

    def _read(self) -> Iterator[pa.RecordBatch]:
        """Yields batches; returns True when the shard's end was reached."""
        deadline = None
        if self.limits.max_time_s is not None and self.replay is None:
            deadline = time.monotonic() + self.limits.max_time_s
        iterator = self._iterator(self.task.start)
        builder = BatchBuilder(self.context)
        while True:
            answer = self._get_records(iterator)
            if answer is None:  # the iterator expired: get a new one where we are
                iterator = self._iterator(self._position())
                continue
            self._behind = answer.get("MillisBehindLatest")
            stop = self._take(answer["Records"], builder)
            if len(builder):
                yield builder.build()
            if stop:
                return False
            iterator = answer.get("NextShardIterator")
            if iterator is None:
                self._check_replay_reached(at_shard_end=True)
                return True
            if self._caught_up(answer):
                self._check_replay_reached(at_shard_end=False)
                return False
            if deadline is not None and time.monotonic() >= deadline:
                return False
            if self.limits.fetch_interval_s:
                time.sleep(self.limits.fetch_interval_s)

    def _caught_up(self, answer: dict[str, Any]) -> bool:
        return not answer["Records"] and answer.get("MillisBehindLatest", 0) == 0

    def _take(self, records: list[dict[str, Any]], builder: BatchBuilder) -> bool:
        """Add the answer's user records to ``builder``; True when a stop condition was met inside the answer."""
        until = self._until()
        for record in records:
            if self._after_stop_time(record):
                return True
            rows = [row for row in user_rows(record, self.context) if not skips(self._from, row)]
            for index, row in enumerate(rows):
                if until is not None and (int(row.sequence_number), row.sub_sequence_number) > until:
                    return True  # past an end that names no existing record
                builder.append(row)
                self._count += 1
                self._last = row
                self._last_complete = index == len(rows) - 1
                if until is not None:
                    if (int(row.sequence_number), row.sub_sequence_number) == until:
                        return True
                elif self.limits.max_records is not None and self._count >= self.limits.max_records:
                    return True
        return False

    def _after_stop_time(self, record: dict[str, Any]) -> bool:
        if self.limits.stop_after_ms is None or self._until() is not None:
            return False
        arrival: datetime | None = record.get("ApproximateArrivalTimestamp")
        return arrival is not None and arrival.timestamp() * 1000 > self.limits.stop_after_ms

    def _until(self) -> tuple[int, int] | None:
        """The last record to return when the range has a fixed end (a replay, or a batch read's end)."""
        if self.replay is not None and self.replay.last_sequence_number is not None:
            return int(self.replay.last_sequence_number), self.replay.last_sub_sequence_number
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
        """Where reading continues from now (after the last returned record, else the task's start)."""
        if self._last is None:
            return self.task.start
        sub = WHOLE_RECORD if self._last_complete else self._last.sub_sequence_number
        return Position(AFTER_SEQUENCE_NUMBER, self._last.sequence_number, sub)

    def _finish(self, shard_end: bool) -> None:
        last = self._last
        self.result = ShardRead(
            stream=self.task.stream,
            shard_id=self.task.shard_id,
            start=self.task.start,
            records=self._count,
            last_sequence_number=last.sequence_number if last else None,
            last_sub_sequence_number=last.sub_sequence_number if last else WHOLE_RECORD,
            last_complete=self._last_complete,
            shard_end=shard_end,
            millis_behind_latest=self._behind,
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

    def _iterator(self, position: Position) -> str:
        request = iterator_request(position)
        self._from = position
        for _attempt in range(FUTURE_TIMESTAMP_WAITS):
            try:
                answer = self.retry.call(
                    self.kinesis.get_shard_iterator,
                    StreamName=self.task.stream,
                    ShardId=self.task.shard_id,
                    what=f"GetShardIterator on {self._what}",
                    **request,
                )
                return answer["ShardIterator"]
            except ClientError as exc:
                # The driver's clock may run ahead of Kinesis': an AT_TIMESTAMP made from it (LATEST) can be a
                # few milliseconds in Kinesis' future, which it refuses. Wait for Kinesis' clock to pass it.
                if not _is_future_timestamp(exc):
                    raise
                time.sleep(FUTURE_TIMESTAMP_PAUSE_S)
        raise RuntimeError(
            f"GetShardIterator on {self._what}: Kinesis kept refusing AT_TIMESTAMP {position.timestamp_ms} as in the "
            f"future for {FUTURE_TIMESTAMP_WAITS * FUTURE_TIMESTAMP_PAUSE_S:.0f} s; is this machine's clock ahead?"
        )

    def _get_records(self, iterator: str) -> dict[str, Any] | None:
        """One GetRecords answer, or None when the iterator expired."""
        self._calls += 1
        try:
            return self.retry.call(
                self.kinesis.get_records,
                ShardIterator=iterator,
                Limit=self.limits.records_per_call,
                what=f"GetRecords on {self._what}",
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ExpiredIteratorException":
                return None
            raise


FUTURE_TIMESTAMP_WAITS = 50
FUTURE_TIMESTAMP_PAUSE_S = 0.2


def _is_future_timestamp(exc: ClientError) -> bool:
    error = exc.response.get("Error", {})
    return error.get("Code") == "InvalidArgumentException" and "cannot be greater than" in error.get("Message", "")


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch (UTC)."""
    return int(datetime.now(UTC).timestamp() * 1000)
