"""How often the query calls one shard with GetRecords, wherever the call is made: the driver's probes, the tasks'
reads, their read-ahead and retries. Both halves keep it, so it sits below both.

AWS admits 5 GetRecords a shard in any sliding second, shared by every application reading the shard. The query
keeps to ``SHARED_CALLS_PER_S`` of them (``ALONE_CALLS_PER_S`` where ``kinesis.probeIntervalMs`` says it reads the
shard alone) in any ``RATE_WINDOW_S``: the driver counts every call it knows of (``source.call_window``), and a
task, which cannot see the others, starts its calls ``min_call_gap_s`` apart at least, from the call before its
first too (docs/source.md, "What the source costs a shard"). The shard's 2 MiB/s of answers is kept the same way:
every answer's bytes are paid back from its call's start (``paid_back_at``), by the task that read them and by the
driver, which hears of the reads' debts and waits for them before it probes the shard.
"""

from __future__ import annotations

from .record_sizes import SHARD_READ_BYTES_PER_S

SHARED_CALLS_PER_S = 4  # of a busy shard's 5 calls a second: one left to another reader (Lambda polls once a second)
ALONE_CALLS_PER_S = 5  # ...unless kinesis.probeIntervalMs <= ALONE_PROBE_INTERVAL_S says the query reads it alone
ALONE_PROBE_INTERVAL_S = 0.2
# AWS's sliding second and 10 ms: a call that reached AWS late would make the next the 6th of its second beside
# another reader's.
RATE_WINDOW_S = 1.01
# A call's bytes count from its start, but from no longer than this before its answer: a slow call leaves the
# shard at most half the debt Kinesis tolerates (docs/source.md, "Reading at the shard's limit").
MAX_CHARGE_LAG_S = 0.5


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


def paid_back_at(paid_at: float, started_at: float | None, answered_at: float, nbytes: int) -> float:
    """When a shard that pays back its earlier answers at ``paid_at`` has also paid back an answer of ``nbytes``
    that came at ``answered_at`` from a call started at ``started_at`` (None: unknown, counted from the answer): at
    the shard's 2 MiB/s, counted from the call's start but from no longer than ``MAX_CHARGE_LAG_S`` before the
    answer. Any one clock, in seconds."""
    counted_from = answered_at
    if started_at is not None:
        counted_from = max(min(started_at, answered_at), answered_at - MAX_CHARGE_LAG_S)
    return max(paid_at, counted_from) + nbytes / SHARD_READ_BYTES_PER_S
