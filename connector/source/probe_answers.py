"""Driver side: what one probe's GetRecords answer says about a shard (``Found``, ``ProbeResult``, ``judge``).

Who calls it: ``probe.ShardProber``, which judges each answer it gets; ``probe_turns``, which decides from a shard's
last answer when to ask it again; and ``planner.BatchPlanner``, which plans a batch from the answers.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..fetch.decode import AnswerSummary


class Found(enum.Enum):
    DATA = "data"  # a record (arrived within the bound), or MillisBehindLatest > 0
    NOTHING = "nothing"  # at the tip, or the next record arrived after the bound
    SHARD_END = "shardEnd"  # a closed shard with nothing after the position
    POSITION_GONE = "positionGone"  # the position's record was trimmed (or the stream re-created)
    SHARD_GONE = "shardGone"  # the shard does not exist any more


@dataclass(frozen=True)
class ProbeResult:
    found: Found
    millis_behind_latest: int | None = None
    arrival_ms: int | None = None  # the probed record's arrival time, when one was seen
    error: str | None = None  # what Kinesis said, for POSITION_GONE / SHARD_GONE


def judge(answer: AnswerSummary, bound_ms: int | None) -> ProbeResult:
    """What ``answer`` says: records count only when they arrived by ``bound_ms`` (AvailableNow's bound, if any);
    an empty answer without a NextShardIterator is the shard's end."""
    behind = answer.millis_behind_latest
    if answer.kinesis_records:
        arrival_us = answer.first_arrival_us
        arrival_ms = arrival_us // 1000 if arrival_us is not None else None
        late = bound_ms is not None and arrival_ms is not None and arrival_ms > bound_ms
        return ProbeResult(Found.NOTHING if late else Found.DATA, behind, arrival_ms)
    if answer.next_iterator is None:
        return ProbeResult(Found.SHARD_END, behind)
    if behind:  # nothing in this stretch, but records further on (AWS skips through old, empty stretches)
        return ProbeResult(Found.DATA, behind)
    return ProbeResult(Found.NOTHING, behind)
