"""The GetRecords transport: one shard's records as decoded Pages, through GetShardIterator + GetRecords. Who calls
it: the range reader (``fetch.range.ShardRange``, whose rules decide which rows count and when to stop) for the
source's ``read()`` on executors, the batch reader, and the planner when it completes an unread shard, through
``SourceSettings.transport``. It starts from the iterator or the probe's answer it is handed (``ShardTask.handoff``,
``ShardTask.held``) or opens one, sizes each call's ``Limit`` by bytes (``ShardMemory``, ``sized_limit``), paces the
calls (``CallPacer``, ``ReadBackoff``), asks one call ahead while its caller works through a page, and reopens after
the last record delivered when an iterator expires; the rules: docs/source.md, "How a micro-batch is planned and
read" and "Reading at the shard's limit".
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from botocore.exceptions import ClientError

from ...aws.clients import RAW_BODY
from ...clock import monotonic_at, now_ms
from ...positions import AFTER_SEQUENCE_NUMBER, WHOLE_RECORD, Position
from ...record_sizes import sized_limit
from ...retry import RetriesExhaustedError, RetryPolicy, is_throttled
from ...stream_ids import arn_param
from ..decode import Page, ShardContext, decode_get_records
from ..iterators import Handoff, HeldAnswer, open_iterator, refused_iterator
from ..reads import CALLS_KEPT
from .memory import SHARD_MEMORY
from .pacing import CallPacer, ReadBackoff
from .settings import MIN_BUSY_INTERVAL_S, PollingSettings

_DEFAULT_SETTINGS = PollingSettings()  # frozen: one shared default, as the argument default was


class GetRecordsTransport:
    """``ShardTransport`` over GetRecords for one shard (``kinesis``: a raw-body reader client, see
    pyspark_aws_kinesis.aws)."""

    hands_off_iterators = True  # Page.next_iterator is a GetRecords iterator (fetch.range.ShardTransport)

    def __init__(
        self,
        kinesis: Any,
        context: ShardContext,
        retry: RetryPolicy,
        settings: PollingSettings = _DEFAULT_SETTINGS,
        handoff: Handoff | None = None,
        last_call_ms: int | None = None,
        held: HeldAnswer | None = None,
        not_before_ms: int | None = None,
    ):
        self.kinesis = kinesis
        self.context = context
        self.retry = retry
        self.settings = settings
        self.pacer = CallPacer(settings.call_interval_s)
        self.backoff = ReadBackoff(settings.call_interval_s, settings.records_per_call)
        self.memory = SHARD_MEMORY  # the shard's record size (each call's Limit) and its earlier reads' pay-back
        self._shard = (context.stream_name, context.shard_id)
        self.handoff = handoff  # an iterator someone already holds, used when a read starts at its position
        self.earlier_call_ms = last_call_ms  # the shard's last read's last call, wherever it ran (ShardTask)
        self.held = held  # the probe's answer at the read's start (ShardTask.held): the first page, no call
        self.not_before_ms = not_before_ms  # no call before then: the shard's second has room (ShardTask)
        self.refused_calls = 0  # calls Kinesis refused for the shard's quota (GetRecords, GetShardIterator)
        # when the last GetRecords calls started (wall clock: the driver counts them in the shard's second)
        self.call_starts_ms: deque[int] = deque(maxlen=CALLS_KEPT)
        self.paid_ms: int | None = None  # when the shard has paid back this read's answers (wall clock: the driver's)
        self._what = context.label
        self._starting = threading.Lock()  # a read-ahead call starts, and is listed, only while its read goes on

    def pages(self, start: Position, wanted: Callable[[], int | None]) -> Iterator[Page]:
        """Pages from ``start`` until a page without NextShardIterator (the shard's end)."""
        position = start
        held = self._held_page(start)
        handoff = self.handoff if self.handoff is not None and self.handoff.usable_for(start) else None
        iterator = ""  # with a held page, never used: the page itself brings the next iterator
        if held is None:
            iterator = handoff.iterator if handoff is not None else self._open(position)
        handed = handoff is not None  # the first call's iterator came from elsewhere: Kinesis may refuse it
        if handoff is not None:  # it came from a call on this shard: the first call keeps the interval after it
            self.pacer.started_at(monotonic_at(handoff.at_ms, self.pacer.clock))
        if self.earlier_call_ms is not None:  # the last batch's read, maybe in another process: the same
            self.pacer.started_at(monotonic_at(self.earlier_call_ms, self.pacer.clock))
        self._after_earlier_reads()
        if self.not_before_ms is not None:  # the driver's wall clock; the wait is what is left of it
            self.pacer.not_before(self.pacer.clock() + (self.not_before_ms - now_ms()) / 1000.0)
        ahead: Future[Page | None] | None = None  # the next page, asked while the caller works on this one
        pool: ThreadPoolExecutor | None = None
        ended = threading.Event()  # the read is over: a read-ahead call still waiting for its turn is not made
        try:
            while True:
                if held is not None:
                    page, held, handed = held, None, True  # its NextShardIterator came from elsewhere too
                else:
                    page = ahead.result() if ahead is not None else self._paced_call(iterator, wanted(), handed)
                    ahead, handed = None, False
                if page is None:  # the iterator expired or was refused: a new one after the last record delivered
                    iterator = self._open(position)
                    continue
                # Kinesis answers while the caller works on this page; a page the range then does not need is
                # dropped unread (positions come from the pages taken: nothing skipped or repeated).
                more = self._read_ahead_limit(page, wanted())
                if more is not None:
                    pool = pool or ThreadPoolExecutor(1, thread_name_prefix=f"read-ahead {self.context.shard_id}")
                    ahead = pool.submit(self._paced_call, page.next_iterator, more, handed, ended)
                    handed = False
                yield page
                if page.next_iterator is None:
                    return
                if page.last_sequence is not None:
                    position = Position(AFTER_SEQUENCE_NUMBER, page.last_sequence, WHOLE_RECORD)
                iterator = page.next_iterator
        finally:
            with self._starting:  # before the read's result lists its calls: none starts unlisted after it
                ended.set()
            if pool is not None:  # a call still under way finishes on its own; its page is not needed
                pool.shutdown(wait=False, cancel_futures=True)

    def _held_page(self, start: Position) -> Page | None:
        """The probe's answer at ``start`` as the first page (None without one, or when it no longer serves): the
        probe's call counts as this read's first, for the interval and the shard's byte quota alike."""
        held = self.held
        if held is None or not held.usable_for(start):
            return None
        page = decode_get_records(held.body, self.context)
        page.at_tip = not page.millis_behind_latest and page.kinesis_records < held.limit
        started = monotonic_at(held.called_ms, self.pacer.clock)
        self.pacer.started_at(started)
        self._called(held.called_ms)
        self._answered(page, held.called_ms, started)
        self._pace_after(page)
        return page

    def _after_earlier_reads(self) -> None:
        """This process read the shard before (an earlier micro-batch): keep the interval after its last call and
        wait until its answers are paid back."""
        called_ms, paid_ms, now = self.memory.called_ms(self._shard), self.memory.paid_ms(self._shard), now_ms()
        if called_ms is not None:
            self.pacer.started_at(self.pacer.clock() - max(0.0, (now - called_ms) / 1000.0))
        if paid_ms is not None and paid_ms > now:
            self.pacer.paid_in((paid_ms - now) / 1000.0)

    def _read_ahead_limit(self, page: Page, wanted: int | None) -> int | None:
        """The ``Limit`` of the call to make ahead of the caller after ``page``, or None for no call: at the shard's
        end or tip, or when the page holds all the range still wants."""
        if page.next_iterator is None or page.at_tip:  # at_tip covers an empty answer at the tip
            return None
        if wanted is None:
            return self.backoff.limit
        left = wanted - len(page)
        return left if left > 0 else None

    def _paced_call(
        self, iterator: str, wanted: int | None, handed: bool = False, ended: threading.Event | None = None
    ) -> Page | None:
        """One GetRecords call after the pause, asked again (after a longer pause) while Kinesis refuses it for
        the shard's quota; a read-ahead call (``ended`` given) is not made once its read is over: the driver,
        which counts the shard's calls from the read's result, would never hear of it."""
        while True:
            self.pacer.wait()
            started = self.pacer.last_start
            with self._starting:
                if ended is not None and ended.is_set():
                    return None
                called_ms = now_ms()
                self._called(called_ms)
            try:
                page = self._get_records(iterator, wanted, handed)
            except ClientError as exc:
                if not is_throttled(exc):
                    raise
                self._refused()
                continue
            if page is not None:
                self._answered(page, called_ms, started)
            self.backoff.got_through()
            self._pace_after(page)
            return page

    def _called(self, called_ms: int) -> None:
        """A GetRecords on the shard started at ``called_ms`` (wall clock; a held answer's: the probe's call): the
        read's result lists it, and this process's next read of the shard keeps the interval after it."""
        self.call_starts_ms.append(called_ms)
        self.memory.called(self._shard, called_ms)

    def _answered(self, page: Page, called_ms: int, started: float | None) -> None:
        """An answer came from a call started at ``called_ms`` (wall clock; ``started`` on the pacer's clock): the
        page says so, and its bytes are charged to the shard's read quota from the call's start (the next call
        waits for their pay-back) and teach the shard's record size."""
        page.called_ms = called_ms
        paid_ms = self.paid_ms = now_ms() + round(1000 * self.pacer.charge(page.kinesis_bytes, started))
        large = page.large_records()
        self.memory.learn(self._shard, page.kinesis_records, page.kinesis_bytes, paid_ms, large)

    def _pace_after(self, page: Page | None) -> None:
        """The interval before the next call: the backoff's, and at least ``MIN_BUSY_INTERVAL_S`` while the shard
        has more waiting (4 calls a second carry its 2 MiB/s; the fifth is left to other readers)."""
        interval_s = self.backoff.interval_s
        if page is not None and not page.at_tip and page.next_iterator is not None:
            interval_s = max(interval_s, MIN_BUSY_INTERVAL_S)
        self.pacer.interval_s = interval_s

    def sized_limit(self) -> int:
        """The next call's ``Limit`` by bytes: the records of the shard's known size that fit in one call's budget."""
        settings = self.settings
        first = settings.records_per_call if settings.first_call_limit is None else settings.first_call_limit
        size, share = self.memory.size(self._shard), self.memory.large_share(self._shard)
        return sized_limit(settings.call_budget_bytes, size, first, settings.records_per_call, share)

    def _refused(self) -> None:
        self.refused_calls += 1
        self.backoff.refused()
        self.pacer.interval_s = self.backoff.interval_s

    def _open(self, position: Position) -> str:
        """A GetShardIterator at ``position``; asked again, paced, while its retries end on a quota refusal."""
        while True:
            try:
                return open_iterator(
                    self.kinesis, self.context.stream_name, self.context.shard_id, position, self.retry, self._what
                )
            except RetriesExhaustedError as exc:
                if not is_throttled(exc):
                    raise
                self._refused()
                self.pacer.wait()

    def _get_records(self, iterator: str, wanted: int | None, handed: bool = False) -> Page | None:
        """One GetRecords answer, decoded; None when the iterator expired (or, ``handed``, was refused). A quota
        refusal is raised (``_paced_call`` backs off)."""
        limit = min(self.backoff.limit, self.sized_limit())
        limit = limit if wanted is None else min(limit, wanted)
        try:
            answer = self.retry.call(
                self.kinesis.get_records,
                ShardIterator=iterator,
                **arn_param(self.context.stream_name),
                Limit=limit,
                what=f"GetRecords on {self._what}",
                retry_throttled=False,
            )
        except ClientError as exc:
            if refused_iterator(exc, inherited=handed):
                return None
            raise
        page = decode_get_records(answer[RAW_BODY], self.context)
        # "MillisBehindLatest 0: caught up, no new records at this moment" (the GetRecords reference); a full
        # page may have more behind it on servers that always answer 0 (kinesalite).
        page.at_tip = not page.millis_behind_latest and page.kinesis_records < limit
        return page
