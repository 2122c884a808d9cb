"""Driver side: the steady shards a batch reads without a probe first, and from when their reads may call.

Who calls it: ``probe.ShardProber``, which tells it whether each probe and read of a shard found records (``heard``)
and asks it, for the planner (``ShardProber.deferred``), which shards to plan without asking. A shard whose answers
found records ``STEADY_ANSWERS`` times in a row is planned at once and its read makes the call a probe would have
made, after Spark's own work between the trigger and the task, taking what had arrived by then; when the producer
stops, that read finds nothing (one empty micro-batch). Why and what it gains: docs/source.md, "Latency".
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from .call_window import ShardCallWindows

# From a trigger to its batch's first read call at the earliest (offset log, planning, the task's start).
READ_LEAD_S = 0.04
# Answers in a row with records that make a shard steady (a probe and the read that took its answer count two):
# records at five triggers in a row; a burst read in a few batches never is.
STEADY_ANSWERS = 10


class SteadyShards:
    """Per shard key, how many of its probes and reads in a row found records (at any position); which steady
    shards a batch reads without a probe, each with the wall-clock ms from which its second has room."""

    def __init__(self, windows: ShardCallWindows, window_wait_s: float):
        self._windows = windows  # the query's calls on each shard in its second (the prober's)
        self._window_wait_s = window_wait_s  # how long a read may wait for room in the shard's second
        self._found_in_row: dict[str, int] = {}

    def heard(self, key: str, found: bool) -> None:
        """A probe or read of ``key`` found records, or not."""
        self._found_in_row[key] = self._found_in_row.get(key, 0) + 1 if found else 0

    def read_starts(self, keys: Iterable[str], now: float, wall_ms: int) -> dict[str, int]:
        """Of ``keys`` (busy shards, not backing off, whose read can start at once with a known iterator), the
        steady ones whose second has room within ``window_wait_s`` of the read's first call (``READ_LEAD_S`` after
        ``now``), each with the wall-clock ms from which it has room, its answers paid back too
        (``ShardTask.not_before_ms``)."""
        chosen: dict[str, int] = {}
        for key in keys:
            if self._found_in_row.get(key, 0) < STEADY_ANSWERS:
                continue
            # The read calls READ_LEAD_S from now or later, and waits in its task for the shard's pay-back, as it
            # would after a probe; a second full of the query's calls a moment longer is not worth waiting for.
            if self._windows.second_room_in(key, now) - READ_LEAD_S <= self._window_wait_s:
                chosen[key] = wall_ms + math.ceil(self._windows.room_in(key, now) * 1000)
        return chosen

    def forget(self, keep: set[str]) -> None:
        """Drop the counts of shards no longer tracked."""
        self._found_in_row = {key: count for key, count in self._found_in_row.items() if key in keep}
