"""A shard's read quota on a simulated clock, shared with a neighbour: a hand-moved clock that the quota proxy's own
rules (``localaws.quota_model.QuotaBook``, AWS's quotas) read their time from, and another reader (AWS Lambda, say)
that calls GetRecords on the shard once a second, in time order as the clock moves past its calls, counting them and
their refusals. Nothing runs on the wall clock, so the counts are exact.
"""

from __future__ import annotations

import math

from localaws.quota_model import QuotaBook, Quotas, ShardKey

START_S = 1000.0  # the clock's first reading, as the quota model's ManualClock


class NeighbourClock:
    """The clock (``t``, moved by ``advance_to`` or ``sleep``; the quota model's ``Clock``) and ``book``; once
    ``neighbour_from`` started it, the neighbour calls on ``shard`` at ``neighbour_at`` and every second after,
    taking ``neighbour_bytes`` from the shard's read budget when admitted."""

    def __init__(self, shard: ShardKey, neighbour_bytes: int = 0) -> None:
        self.t = START_S
        self.book = QuotaBook(Quotas(), self)
        self.shard, self.neighbour_bytes = shard, neighbour_bytes
        self.neighbour_at = math.inf  # no neighbour until neighbour_from
        self.neighbour_calls = 0
        self.neighbour_refused = 0

    def neighbour_from(self, phase_s: float) -> None:
        """The neighbour's first call ``phase_s`` from now."""
        self.neighbour_at = self.t + phase_s

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.advance_to(self.t + seconds)

    def advance_to(self, t: float) -> None:
        """Move the clock on to ``t`` (never back), the neighbour calling on its way."""
        while self.neighbour_at <= t:
            self.t = self.neighbour_at  # the book sees the neighbour's call at its own time
            self._neighbour_call()
            self.neighbour_at += 1.0
        self.t = max(self.t, t)

    def _neighbour_call(self) -> None:
        self.neighbour_calls += 1
        if self.book.get_records(self.shard) is not None:
            self.neighbour_refused += 1
        elif self.neighbour_bytes:
            self.book.charge_read(self.shard, self.neighbour_bytes)
