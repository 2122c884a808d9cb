"""The wall clock, in one place: milliseconds since the epoch (UTC).

Who calls it: the driver when it plans (a batch reads what had arrived when it was planned; ``LATEST`` becomes the
arrival time of now; AvailableNow's bound) and ``fetch`` when it stamps a shard iterator it hands on (an iterator
expires five minutes after Kinesis issued it). These times are compared with Kinesis' arrival timestamps and
across hosts (an executor's read hands an iterator to the driver's probe), so a monotonic clock would not do.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch, truncated: never ahead of the current millisecond."""
    return time.time_ns() // 1_000_000


def monotonic_at(at_ms: int, clock: Callable[[], float] = time.monotonic) -> float:
    """The reading of ``clock`` (monotonic seconds) at wall-clock ``at_ms``, never later than now: a wait measured
    from a time another process stamped (a handed-on iterator's call), whose host's clock may run ahead of ours."""
    return clock() - max(0.0, (now_ms() - at_ms) / 1000.0)
