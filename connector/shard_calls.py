"""How often the query calls one shard with GetRecords, wherever the call is made: the driver's probes, the tasks'
reads, their read-ahead and retries. Both halves keep it, so it sits below both.

AWS admits 5 GetRecords a shard in any sliding second, shared by every application reading the shard. The query
keeps to ``SHARED_CALLS_PER_S`` of them (``ALONE_CALLS_PER_S`` where ``kinesis.probeIntervalMs`` says it reads the
shard alone) in any ``RATE_WINDOW_S``: the driver counts every call it knows of (``source.call_window``), and a
task, which cannot see the others, starts its calls ``min_call_gap_s`` apart at least, from the call before its
first too (docs/source.md, "What the source costs a shard").
"""

from __future__ import annotations

SHARED_CALLS_PER_S = 4  # of a busy shard's 5 calls a second: one left to another reader (Lambda polls once a second)
ALONE_CALLS_PER_S = 5  # ...unless kinesis.probeIntervalMs <= ALONE_PROBE_INTERVAL_S says the query reads it alone
ALONE_PROBE_INTERVAL_S = 0.2
# AWS's sliding second and 10 ms: a call that reached AWS late would make the next the 6th of its second beside
# another reader's.
RATE_WINDOW_S = 1.01


def query_calls_per_s(probe_interval_s: float) -> int | None:
    """The query's calls a second on one shard for ``kinesis.probeIntervalMs``; None where an idle shard is asked
    more often than AWS allows (whoever sets that takes the refusals)."""
    if probe_interval_s < ALONE_PROBE_INTERVAL_S:
        return None
    return ALONE_CALLS_PER_S if probe_interval_s <= ALONE_PROBE_INTERVAL_S else SHARED_CALLS_PER_S


def min_call_gap_s(calls_per_s: int | None) -> float:
    """The least time between the starts of two of the query's calls on a shard: ``calls_per_s`` of them then span
    ``RATE_WINDOW_S`` (0: no limit kept)."""
    return RATE_WINDOW_S / calls_per_s if calls_per_s else 0.0
