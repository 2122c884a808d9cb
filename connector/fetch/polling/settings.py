"""How the GetRecords transport asks a shard: ``PollingSettings`` (records per call, the pause between calls, the
first call's ``Limit``) and the least interval of a shard with more records waiting. Who calls it:
``source.settings`` makes one from the options; ``polling.transport`` reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...record_sizes import SHARD_READ_BYTES_PER_S

# While more records wait: 4 calls a second carry the shard's 2 MiB/s and the fifth of its 5 is left to other
# readers (docs/source.md, "Reading at the shard's limit").
MIN_BUSY_INTERVAL_S = 0.25
FIRST_CALL_LIMIT = 10  # Limit of a shard's first call while its record size is unknown (options' Limit not set)


@dataclass(frozen=True)
class PollingSettings:
    """How the GetRecords transport asks: records per call (``Limit``, at most), the pause between calls, and the
    ``Limit`` of a shard's first call before its record size is known (None: ``records_per_call``)."""

    records_per_call: int = 10000
    fetch_interval_s: float = 0.2  # between the starts of two calls on one shard
    first_call_limit: int | None = None
    min_call_gap_s: float = 0.0  # the query's least gap between two calls on a shard (shard_calls)

    @property
    def call_interval_s(self) -> float:
        """Between the starts of two calls on one shard: the fetch interval, at least the query's least gap."""
        return max(self.fetch_interval_s, self.min_call_gap_s)

    @property
    def call_budget_bytes(self) -> float:
        """The bytes one answer may hold: the shard's read quota for one call interval (at least
        ``MIN_BUSY_INTERVAL_S``: 4 such answers a second are the shard's 2 MiB/s)."""
        return SHARD_READ_BYTES_PER_S * max(self.call_interval_s, MIN_BUSY_INTERVAL_S)
