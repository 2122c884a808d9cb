"""When a shard's next GetRecords may start: ``CallPacer`` keeps the interval between calls and waits until the
shard has paid back its answers' bytes; ``ReadBackoff`` lengthens the interval and shrinks ``Limit`` while Kinesis
refuses calls for the shard's quota, and steps back as calls get through. Who calls it:
``polling.transport.GetRecordsTransport`` (one of each per read); the rules: docs/source.md, "Reading at the
shard's limit".
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from ...retry import quota_backoff
from ...shard_calls import paid_back_at

NEGLIGIBLE_WAIT_S = 0.001  # a pay-back wait shorter than this is not worth a sleep
MAX_BACKOFF_S = 10.0  # a refused shard's calls wait at most this long (a 10 MiB answer blocks its readers for 5 s)
MIN_LIMIT = 100  # Limit is halved after each refusal, down to this
RECOVER_AFTER = 3  # calls in a row that got through before the pace and Limit step back towards the settings


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

    def charge(self, nbytes: int, started_at: float | None = None) -> float:
        """An answer of ``nbytes`` just came from a call started at ``started_at`` (this pacer's clock; None: now):
        the shard pays it back (``shard_calls.paid_back_at``: after a 10 MiB answer, 5 s), and the next call waits
        for that (``wait``). Returns the seconds from now until the shard has paid back (0 if it has already)."""
        now = self.clock()
        self._paid_at = paid_back_at(self._paid_at, started_at, now, nbytes)
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
