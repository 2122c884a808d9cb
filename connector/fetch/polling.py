"""The GetRecords transport: one shard's records as decoded Pages, through GetShardIterator + GetRecords.

Who calls it: the source's ``read()`` (executors), the batch reader, and the planner when it completes an unread
shard (driver). It implements ``fetch.range.ShardTransport``: the range rules (``fetch.range.ShardRange``) decide
which rows count and when to stop; this module only talks to Kinesis: it opens an iterator at a position, sizes
each call's ``Limit`` to what the range still wants and to the shard's byte budget of one call interval
(``sized_limit``: 2 MiB/s per shard for at least ``MIN_BUSY_INTERVAL_S``, by the record size of the shard's earlier
answers, ``ShardMemory``), starts calls at least ``fetch_interval_s`` apart (Kinesis allows 5 GetRecords per second
per shard; a call that itself took that long is followed at once; at least ``MIN_BUSY_INTERVAL_S`` while more
records wait, leaving one of the 5 to other readers) and not before the shard has paid back the answers so far,
counted from each call's start (``CallPacer.charge``: 4 full answers a second, the shard's whole 2 MiB/s; counted
from the answer, each call also waited its round trip), decodes the raw
answer body (``decode.decode_get_records``, the fast path), and re-opens after the last record it delivered when
an iterator expires. A read handed an iterator at its start (``ShardTask.handoff``: the shard's last read or probe
ended there) starts with GetRecords; if Kinesis refuses it, it opens a new one at the same position. A read handed
the probe's whole answer at its start (``ShardTask.held``) takes it as its first page without a call, and goes on
from its NextShardIterator only when it was not at the tip: a shard the driver found with a few new records costs
the batch no call at all.

Read-ahead: while the caller works through a page (turning it into Arrow, Spark taking it), the next GetRecords
is already under way on a thread of the transport's own, when the page says more records follow (not the shard's
end, not at the tip) and the range still wants more than the page holds. So Kinesis and this process work at the
same time; at most one call is ahead, under the same pacing. A page asked ahead that the range then does not
need (it stopped on the arrival bound or a replay's last record inside this page) is dropped unread: one extra
call, never a skipped or repeated record, since positions come from the pages the caller took.

Sharing the shard: a read handed an iterator waits a whole interval after that iterator came (the probe or read
that got it was a call on the shard too), and a whole interval after the last batch's read's last call
(``ShardTask.last_call_ms``: the driver plans a shard with more records waiting at once, so the wait overlaps
Spark's own work between batches instead of adding a trigger to it), so reads and probes together keep to the
interval. A call Kinesis
refuses for the shard's quota (``ProvisionedThroughputExceededException``: 5 calls and 2 MiB per second per shard,
shared by every reader) is asked again, never at once and never given up for that alone: ``ReadBackoff``
lengthens the interval (``retry.quota_backoff``: at least 1 s, doubling up to ``MAX_BACKOFF_S``) and halves
``Limit`` (smaller answers use less of the byte quota), and after ``RECOVER_AFTER`` calls in a row that got
through, steps back towards the configured pace and ``Limit``. ``refused_calls`` counts the refusals; the read's
result carries them to the driver, which reports them.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ..aws.clients import RAW_BODY
from ..clock import monotonic_at, now_ms
from ..positions import AFTER_SEQUENCE_NUMBER, WHOLE_RECORD, Position
from ..record_sizes import SHARD_READ_BYTES_PER_S, RecordSizes, sized_limit
from ..retry import RetriesExhaustedError, RetryPolicy, is_throttled, quota_backoff
from .decode import Page, ShardContext, decode_get_records
from .iterators import Handoff, HeldAnswer, open_iterator, refused_iterator
from .reads import CALLS_KEPT

# While a shard has more records waiting, its calls start at least this far apart and each may bring this much of
# the shard's 2 MiB/s: 4 calls a second carry all of it, and the fifth of its 5 is left to other readers (a reader
# polling once a second, as AWS Lambda does, is never refused for our calls; the source's busy probes alike).
MIN_BUSY_INTERVAL_S = 0.25
# A call's bytes count against the shard from the call's start (the server charges them somewhere in the round
# trip, and refuses a call only while more than a second's budget is still to pay back), but never from longer
# than this before its answer: a slow call (or a probe's answer taken later) cannot put the shard in more debt
# than this, half of what it tolerates, the other half left to other readers' answers.
MAX_CHARGE_LAG_S = 0.5
FIRST_CALL_LIMIT = 10  # Limit of a shard's first call while its record size is unknown (options' Limit not set)
NEGLIGIBLE_WAIT_S = 0.001  # a pay-back wait shorter than this is not worth a sleep


@dataclass(frozen=True)
class PollingSettings:
    """How the GetRecords transport asks: records per call (``Limit``, at most), the pause between calls, and the
    ``Limit`` of a shard's first call before its record size is known (None: ``records_per_call``)."""

    records_per_call: int = 10000
    fetch_interval_s: float = 0.2  # between the starts of two calls on one shard
    first_call_limit: int | None = None

    @property
    def call_budget_bytes(self) -> float:
        """The bytes one answer may hold: the shard's read quota for one call interval (at least
        ``MIN_BUSY_INTERVAL_S``: 4 such answers a second are the shard's 2 MiB/s)."""
        return SHARD_READ_BYTES_PER_S * max(self.fetch_interval_s, MIN_BUSY_INTERVAL_S)


class ShardMemory:
    """What this process's reads of a shard learnt for the next read of it: the mean size of its records (for
    sizing ``Limit``), when their last call started and when the shard has paid back their answers (wall clock,
    ms: the next micro-batch's read keeps the interval and waits for the pay-back instead of being refused).

    Process-wide (one entry per stream and shard, shared by the reads of successive micro-batches in a reused
    Python worker, and by the read-ahead thread): a batch's first call then needs no small probing ``Limit``.
    Bounded for a long run's reshards: beyond ``max_shards`` the shard read longest ago is forgotten, never one
    still being read."""

    MAX_SHARDS = 10_000

    def __init__(self, max_shards: int = MAX_SHARDS) -> None:
        self.max_shards = max_shards
        self._sizes: RecordSizes[tuple[str, str]] = RecordSizes()
        self._paid_ms: dict[tuple[str, str], int] = {}
        self._called_ms: dict[tuple[str, str], int] = {}
        self._recent: dict[tuple[str, str], None] = {}  # every shard remembered, the one read longest ago first
        self._lock = threading.Lock()  # the read-ahead thread and the reader both tell

    def size(self, shard: tuple[str, str]) -> float | None:
        return self._sizes.get(shard)

    def paid_ms(self, shard: tuple[str, str]) -> int | None:
        return self._paid_ms.get(shard)

    def called_ms(self, shard: tuple[str, str]) -> int | None:
        return self._called_ms.get(shard)

    def __len__(self) -> int:
        return len(self._recent)

    def called(self, shard: tuple[str, str], at_ms: int) -> None:
        """A GetRecords on ``shard`` started at ``at_ms``."""
        with self._lock:
            self._called_ms[shard] = max(at_ms, self._called_ms.get(shard, at_ms))
            self._touched(shard)

    def learn(self, shard: tuple[str, str], records: int, nbytes: int, paid_ms: int) -> None:
        """An answer of ``records`` records and ``nbytes`` bytes came for ``shard``, paid back at ``paid_ms``
        (empty answers teach no size)."""
        with self._lock:
            self._paid_ms[shard] = max(paid_ms, self._paid_ms.get(shard, paid_ms))
            self._sizes.learn(shard, records, nbytes)
            self._touched(shard)

    def _touched(self, shard: tuple[str, str]) -> None:
        self._recent.pop(shard, None)
        self._recent[shard] = None
        while len(self._recent) > self.max_shards:
            oldest = next(iter(self._recent))
            del self._recent[oldest]
            self._paid_ms.pop(oldest, None)
            self._called_ms.pop(oldest, None)
            self._sizes.forget(oldest)


SHARD_MEMORY = ShardMemory()


class CallPacer:
    """Keeps the starts of successive calls at least ``interval_s`` apart: the wait before a call is what is left
    of the interval since the previous call started (time spent in the call and in the caller counts); and keeps
    the shard's read quota: a call waits until the answers so far are paid back (``charge``)."""

    def __init__(
        self,
        interval_s: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.interval_s = interval_s
        self.clock = clock
        self.sleep = sleep
        self._last_start: float | None = None
        self._paid_at = -math.inf  # when the shard has paid back the bytes of the answers charged so far

    def wait(self) -> None:
        """Call right before a call: waits out the rest of the interval and of the pay-back of the answers so far
        (``charge``), then marks the call's start."""
        now = self.clock()
        left = 0.0
        if self._last_start is not None and self.interval_s > 0:
            left = self._last_start + self.interval_s - now
        paying = self._paid_at - now
        left = max(left, paying if paying >= NEGLIGIBLE_WAIT_S else 0.0)
        if left > 0:
            self.sleep(left)
        self._last_start = self.clock()

    @property
    def last_start(self) -> float | None:
        """When the last call started (``wait``), on this pacer's clock."""
        return self._last_start

    def charge(self, nbytes: int, started_at: float | None = None, rate: float = SHARD_READ_BYTES_PER_S) -> float:
        """An answer of ``nbytes`` just came from a call started at ``started_at`` (this pacer's clock; None: now):
        the shard pays it back at ``rate`` (after a 10 MiB answer, 5 s), counted from the call's start but from no
        longer than ``MAX_CHARGE_LAG_S`` ago, and the next call waits for that (``wait``). Counted from the answer,
        each call also waited its own round trip: ~3.8 calls a second where the answers' bytes allow 4 or 5.
        Returns the seconds from now until the shard has paid back (0 if it has already)."""
        now = self.clock()
        counted_from = now if started_at is None else max(min(started_at, now), now - MAX_CHARGE_LAG_S)
        self._paid_at = max(self._paid_at, counted_from) + nbytes / rate
        return max(0.0, self._paid_at - now)

    def paid_in(self, seconds: float) -> None:
        """Another read's answers on the shard are paid back ``seconds`` from now: the next call waits for it."""
        self.not_before(self.clock() + seconds)

    def not_before(self, when: float) -> None:
        """The next call starts at ``when`` (this pacer's clock) at the earliest: the shard's second has room then."""
        self._paid_at = max(self._paid_at, when)

    def started_at(self, when: float) -> None:
        """A call on the shard started at ``when`` (this pacer's clock) elsewhere: the next waits from there."""
        self._last_start = when if self._last_start is None else max(self._last_start, when)


MAX_BACKOFF_S = 10.0  # a refused shard's calls wait at most this long (a 10 MiB answer blocks its readers for 5 s)
MIN_LIMIT = 100  # Limit is halved after each refusal, down to this
RECOVER_AFTER = 3  # calls in a row that got through before the pace and Limit step back towards the settings


class ReadBackoff:
    """Adaptive pacing of one shard's read: the interval between calls and the ``Limit`` of each, lengthened and
    shrunk when Kinesis refuses a call for the shard's quota, restored step by step when calls get through."""

    def __init__(self, interval_s: float, limit: int):
        self.base_interval_s, self.base_limit = interval_s, limit
        self.interval_s, self.limit = interval_s, limit
        self._through = 0  # calls that got through since the last refusal or step back

    def refused(self) -> None:
        """A call was refused: wait longer before the next, ask for fewer records."""
        self.interval_s = quota_backoff(self.interval_s, MAX_BACKOFF_S)
        self.limit = max(min(MIN_LIMIT, self.base_limit), self.limit // 2)
        self._through = 0

    def got_through(self) -> None:
        """A call got through: after ``RECOVER_AFTER`` of them, halve the extra wait and double ``Limit`` again."""
        if self.interval_s == self.base_interval_s and self.limit == self.base_limit:
            return
        self._through += 1
        if self._through >= RECOVER_AFTER:
            self._through = 0
            shorter = self.interval_s / 2
            self.interval_s = shorter if shorter > self.base_interval_s + 0.01 else self.base_interval_s
            self.limit = min(self.base_limit, 2 * self.limit)


class GetRecordsTransport:
    """``ShardTransport`` over GetRecords for one shard (``kinesis``: a raw-body reader client, see
    pyspark_aws_kinesis.aws)."""

    hands_off_iterators = True  # Page.next_iterator is a GetRecords iterator (fetch.range.ShardTransport)

    def __init__(
        self,
        kinesis: Any,
        context: ShardContext,
        retry: RetryPolicy,
        settings: PollingSettings = PollingSettings(),
        handoff: Handoff | None = None,
        last_call_ms: int | None = None,
        held: HeldAnswer | None = None,
        not_before_ms: int | None = None,
    ):
        self.kinesis = kinesis
        self.context = context
        self.retry = retry
        self.settings = settings
        self.pacer = CallPacer(settings.fetch_interval_s)
        self.backoff = ReadBackoff(settings.fetch_interval_s, settings.records_per_call)
        self.memory = SHARD_MEMORY  # the shard's record size (each call's Limit) and its earlier reads' pay-back
        self._shard = (context.stream_name, context.shard_id)
        self.handoff = handoff  # an iterator someone already holds, used when a read starts at its position
        self.earlier_call_ms = last_call_ms  # the shard's last read's last call, wherever it ran (ShardTask)
        self.held = held  # the probe's answer at the read's start (ShardTask.held): the first page, no call
        self.not_before_ms = not_before_ms  # no call before then: the shard's second has room (ShardTask)
        self.refused_calls = 0  # calls Kinesis refused for the shard's quota (GetRecords, GetShardIterator)
        # when the last GetRecords calls started (wall clock: the driver counts them in the shard's second)
        self.call_starts_ms: deque[int] = deque(maxlen=CALLS_KEPT)
        self._what = context.label

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
                more = self._read_ahead_limit(page, wanted())
                if more is not None:
                    pool = pool or ThreadPoolExecutor(1, thread_name_prefix=f"read-ahead {self.context.shard_id}")
                    ahead = pool.submit(self._paced_call, page.next_iterator, more, handed)
                    handed = False
                yield page
                if page.next_iterator is None:
                    return
                if page.last_sequence is not None:
                    position = Position(AFTER_SEQUENCE_NUMBER, page.last_sequence, WHOLE_RECORD)
                iterator = page.next_iterator
        finally:
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

    def _paced_call(self, iterator: str, wanted: int | None, handed: bool = False) -> Page | None:
        """One GetRecords call after the pause, asked again (after a longer pause) while Kinesis refuses it for
        the shard's quota."""
        while True:
            self.pacer.wait()
            started = self.pacer.last_start
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
        paid_ms = now_ms() + round(1000 * self.pacer.charge(page.kinesis_bytes, started))
        self.memory.learn(self._shard, page.kinesis_records, page.kinesis_bytes, paid_ms)

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
        size = self.memory.size(self._shard)
        return sized_limit(settings.call_budget_bytes, size, first, settings.records_per_call)

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
