"""The range rules of one shard's read: which rows of a transport's Pages to return, when to stop, and the result.

Who calls it: the source's ``read()`` on executors, the batch reader, and the driver when it completes a read that no
executor finished (``source.completion``); ``source.settings.SourceSettings.shard_reader`` builds their
``ShardRange`` for a ``ShardTask`` and its ``ShardTransport`` (GetRecords or enhanced fan-out). They iterate
``batches()`` (or ``slices()``) to the end; ``result`` then says where the read stopped and why, for the metadata
store. Nothing here calls AWS. The rules, the iterator handoff and why a closed shard's tip is never taken for its
end: docs/source.md, "How a micro-batch is planned and read" and "Resharding".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa

from ..clock import now_ms
from ..errors import KinesisConnectorError
from ..positions import AFTER_SEQUENCE_NUMBER, AT_SEQUENCE_NUMBER, TRIM_HORIZON, WHOLE_RECORD, Position, shard_label
from .decode import Page, ShardContext
from .iterators import Handoff, HeldAnswer, PositionGoneError, ShardGoneError, data_loss
from .reads import STOP_BOUND, STOP_CAUGHT_UP, STOP_END, STOP_LIMIT, STOP_SHARD_END, STOP_TIME, DataLossEvent, ShardRead


class ReplayError(KinesisConnectorError, RuntimeError):
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
    handoff: Handoff | None = None  # a GetRecords iterator at ``start`` from the shard's last read or probe
    last_call_ms: int | None = None  # when the shard's last read made its last GetRecords (wall ms), if known
    held: HeldAnswer | None = None  # the probe's GetRecords answer at ``start``: the read's first page
    not_before_ms: int | None = None  # the shard's second has room for the read's first call from then (wall ms)

    @property
    def label(self) -> str:
        return shard_label(self.stream, self.shard_id)


@dataclass(frozen=True)
class FetchLimits:
    """How much one read of one shard may take. A read stops at the first of, in this order: a fixed end
    (``replay``, ``until``: every limit ignored); the end of a closed shard; ``max_records`` user records (maybe
    inside a KPL aggregate); the first record that arrived after ``stop_after_ms`` (with ``stop_at_first_call``,
    after the read's first call), or with ``whole_answer_at_bound`` after the answer that holds it; caught up (an
    empty answer at the tip, or a page marked ``at_tip``); ``max_time_s`` (never in a replay, nor when the driver
    completes a read)."""

    max_records: int | None = None
    max_time_s: float | None = None
    stop_after_ms: int | None = None
    stop_at_first_call: bool = False  # without ``stop_after_ms``: bound by the first page
    # A micro-batch takes the answer in which it meets its arrival bound whole: those records are in hand, and
    # reading them again next batch would spend the shard's read quota twice (docs/source.md, "Executors read").
    whole_answer_at_bound: bool = False

    @classmethod
    def of_batch(
        cls, max_records: int | None, max_time_s: float | None, until_ms: int | None, whole_answer: bool = True
    ) -> FetchLimits:
        """A micro-batch's read of a shard: bound by the batch's planned arrival time, or, where it has none (a
        steady shard planned without a probe, an older checkpoint), by what had arrived by the read's first call;
        ``whole_answer``: see ``whole_answer_at_bound``."""
        return cls(max_records, max_time_s, until_ms, until_ms is None, whole_answer_at_bound=whole_answer)


class ShardTransport(Protocol):
    """Delivers one shard's records as decoded Pages, in order, re-opening by itself when its cursor expires
    (GetRecords or SubscribeToShard). ``Page.next_iterator`` None: the shard is closed and the page holds its last
    records. A start whose records or shard are gone raises ``PositionGoneError`` / ``ShardGoneError``, which the
    range judges (``kinesis.failOnDataLoss``)."""

    def pages(self, start: Position, wanted: Callable[[], int | None]) -> Iterator[Page]:
        """Pages from ``start`` on, in order, until the caller stops iterating or a page ends the shard.

        ``wanted()`` is how many more rows the range can return (None: no cap), a hint for sizing requests.
        Raises PositionGoneError / ShardGoneError when ``start`` cannot be opened. A transport whose
        ``next_iterator`` is a GetRecords shard iterator (not a subscription's continuation) says so with a true
        class attribute ``hands_off_iterators``: only then does a read hand its last one on. A transport that
        counts the calls Kinesis refused for a quota has them in ``refused_calls``, and the wall-clock starts of its
        last calls in ``call_starts_ms`` (the read's result keeps both).
        """
        ...


def skipped_rows(position: Position, page: Page, start: int = 0) -> int:
    """Index of the first row at or after ``start`` that ``position`` does not exclude.

    Only rows of the record a position points at can be excluded (an AT/AFTER position inside a KPL aggregate
    re-reads the whole record), and that record is the first of the first page of a read.
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


class ShardRange:
    """Applies the range rules to one ShardTask; iterate ``batches()`` (or ``slices()``) to the end, then read
    ``result``. ``replay``: a batch that runs again stops exactly after the recorded last record (returns nothing
    if the first run did); ``until`` (a batch read's explicit end) stops the same way, the record need not exist."""

    def __init__(
        self,
        task: ShardTask,
        limits: FetchLimits,
        context: ShardContext,
        replay: ShardRead | None = None,
        until: tuple[str, int] | None = None,
        fail_on_data_loss: bool = False,
    ):
        self.task = task
        self.limits = limits
        self.context = context
        self.replay = replay
        self.until = until  # (sequence number, sub-sequence number) of the last record to return, inclusive
        self.fail_on_data_loss = fail_on_data_loss
        self.result: ShardRead | None = None
        self._count = 0
        self._dropped = 0  # KPL sub-records outside the shard's hash range
        self._loss: DataLossEvent | None = None
        self._last: tuple[str, int, bool] | None = None  # sequence, sub-sequence, last of its Kinesis record
        self._behind: int | None = None
        self._start = task.start  # where reading really started (TRIM_HORIZON after lost data)
        self._hands_off = False  # the transport's next_iterator is a GetRecords iterator
        self._aligned = True  # the last page's next_iterator points at next_start() (see the module doc)
        self._tail: tuple[str, int] | None = None  # that iterator and when it came (wall ms), while aligned
        self._transport: ShardTransport | None = None
        self._stop_after_ms = limits.stop_after_ms  # the arrival bound, once known (``_arrival_bound``)

    def batches(self, transport: ShardTransport) -> Iterator[pa.RecordBatch]:
        """RecordBatches of the shard's records from the start position to the first stop condition."""
        for page, start, stop_at in self.slices(transport):
            yield page.to_batch(self.context, start, stop_at)

    def slices(self, transport: ShardTransport) -> Iterator[tuple[Page, int, int]]:
        """``(page, start, stop)``: rows ``start:stop`` of ``page`` belong to the range (never empty)."""
        if self.replay is not None and self.replay.records == 0:
            self.result = self.replay  # the first run returned nothing: so does this one, without asking AWS
            return
        stop = yield from self._read(transport)
        self._finish(stop)

    @property
    def _max_records(self) -> int | None:
        caps = [cap for cap in (self.limits.max_records, self.task.max_records) if cap is not None]
        return min(caps) if caps else None

    def _wanted(self) -> int | None:
        cap = self._max_records
        return None if cap is None or self._until() is not None else max(1, cap - self._count)

    def _read(self, transport: ShardTransport) -> Iterator[tuple[Page, int, int]]:
        """Yields slices; returns why reading stopped (a ``STOP_*``)."""
        deadline = None
        if self.limits.max_time_s is not None and self.replay is None:
            deadline = time.monotonic() + self.limits.max_time_s
        self._hands_off = bool(getattr(transport, "hands_off_iterators", False))
        self._transport = transport
        pages = self._open(transport)
        if pages is None:
            return STOP_SHARD_END
        for page in pages:
            self._behind = page.millis_behind_latest
            self._dropped += page.dropped_out_of_range
            start, stop_at, stop = self._cut(page)
            if stop_at > start:
                yield page, start, stop_at
                self._took(page, start, stop_at)
            self._follow(page, whole=stop_at == len(page))
            if stop == STOP_BOUND and stop_at == len(page) and page.at_tip:
                return STOP_CAUGHT_UP  # the answer taken whole reached the tip: nothing is waiting
            if stop is not None:
                return stop
            if page.next_iterator is None:
                self._check_replay_reached(at_shard_end=True)
                return STOP_SHARD_END
            if page.caught_up:
                self._check_replay_reached(at_shard_end=False)
                return STOP_CAUGHT_UP
            if page.at_tip and self._until() is None:  # no second call (and pause) to hear "nothing more"
                return STOP_CAUGHT_UP
            if deadline is not None and time.monotonic() >= deadline:
                return STOP_TIME
        raise RuntimeError(f"the transport of {self.task.label} ended without a shard end")

    def _open(self, transport: ShardTransport) -> Iterator[Page] | None:
        """The transport's pages from the start; on lost data, fail or go on from the oldest record (None: the
        shard is gone, nothing to read)."""
        pages = transport.pages(self._start, self._wanted)
        try:
            first = next(pages)
        except (PositionGoneError, ShardGoneError) as gone:
            if isinstance(gone, ShardGoneError):
                data_loss(self.task.label, self._start, gone, self.fail_on_data_loss, "the shard's children")
                self._loss = DataLossEvent(self._start, "shard gone")
                return None
            data_loss(self.task.label, self._start, gone, self.fail_on_data_loss, "the oldest record still there")
            self._loss = DataLossEvent(self._start, "position gone")
            self._start = Position(TRIM_HORIZON)
            pages = transport.pages(self._start, self._wanted)
            first = next(pages)
        return _chain(first, pages)

    def _cut(self, page: Page) -> tuple[int, int, str | None]:
        """Which rows of ``page`` to return (``start:stop_at``) and the stop condition met inside it, if any."""
        start = skipped_rows(self._start, page)
        stop_at, stop = len(page), None
        until = self._until()
        if until is not None:
            after = page.first_after(*until, start)
            if after < len(page) or (after > start and (page.sequences[after - 1], page.subs[after - 1]) == until):
                return start, after, STOP_END
            return start, after, None
        bound_ms = self._arrival_bound(page)
        if bound_ms is not None:
            late = page.first_arrival_after(bound_ms, start)
            if late < stop_at:
                stop_at, stop = (stop_at if self.limits.whole_answer_at_bound else late), STOP_BOUND
        cap = self._max_records
        if cap is not None:
            limit_at = start + cap - self._count
            if limit_at < stop_at or (limit_at == stop_at and stop is None):
                stop_at, stop = limit_at, STOP_LIMIT
        return start, stop_at, stop

    def _arrival_bound(self, page: Page) -> int | None:
        """The arrival time after which records are left to later batches (None: no bound). With
        ``stop_at_first_call``, fixed by the first page: when its call started, or its last record's arrival if
        later (the server's clock may run ahead of this host's), so that page is always taken whole."""
        if self._stop_after_ms is None and self.limits.stop_at_first_call:
            last_arrival_us = max((at for at in page.arrivals_us if at is not None), default=0)
            called_ms = page.called_ms if page.called_ms is not None else now_ms()
            self._stop_after_ms = max(called_ms, last_arrival_us // 1000)
        return self._stop_after_ms

    def _took(self, page: Page, start: int, stop_at: int) -> None:
        self._count += stop_at - start
        last = stop_at - 1
        self._last = (page.sequences[last], page.subs[last], page.record_ends[last])

    def _follow(self, page: Page, whole: bool) -> None:
        """Keep the page's next iterator while it points exactly at where the next read starts: after the last
        record returned, which must be the page's last Kinesis record, returned whole. An empty page leaves its
        iterator where the previous one was."""
        if page.kinesis_records:
            last = self._last
            self._aligned = whole and last is not None and last[0] == page.last_sequence and last[2]
        self._tail = None
        if self._hands_off and self._aligned and page.next_iterator is not None:
            self._tail = (page.next_iterator, page.called_ms if page.called_ms is not None else now_ms())

    def _until(self) -> tuple[str, int] | None:
        """The last record to return when the range has a fixed end (a replay, or a batch read's end)."""
        if self.replay is not None and self.replay.last_sequence_number is not None:
            return self.replay.last_sequence_number, self.replay.last_sub_sequence_number
        return self.until

    def _check_replay_reached(self, at_shard_end: bool) -> None:
        if self.replay is not None and self.replay.last_sequence_number is not None:
            target = f"{self.replay.last_sequence_number}/{self.replay.last_sub_sequence_number}"
            raise ReplayError(
                f"replaying a batch of {self.task.label}: reached the {'shard end' if at_shard_end else 'tip'} "
                f"after {self._count} records without meeting record {target} where the first run stopped after "
                f"{self.replay.records} records (were records trimmed?)"
            )

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
            dropped_out_of_range=self._dropped,
            data_loss=self._loss,
            next_iterator=self._tail[0] if self._tail else None,
            iterator_ms=self._tail[1] if self._tail else None,
            refused_calls=int(getattr(self._transport, "refused_calls", 0)),
            call_starts_ms=tuple(getattr(self._transport, "call_starts_ms", ())),
            paid_ms=getattr(self._transport, "paid_ms", None),
        )
        if self.replay is not None:
            if self._count != self.replay.records:
                raise ReplayError(
                    f"replaying a batch of {self.task.label} returned {self._count} records where its first run "
                    f"returned {self.replay.records} (were records trimmed?)"
                )
            # Same records up to the same last one: keep the record (its shard end, millisBehindLatest).
            self.result = self.replay


def _chain(first: Page, rest: Iterator[Page]) -> Iterator[Page]:
    yield first
    yield from rest
