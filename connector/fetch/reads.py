"""What one batch's read of one shard returns: where it started and stopped, why, and what it found.

Who calls it: ``fetch.range.ShardRange`` makes a ``ShardRead`` when a read ends; executors record it in the
metadata store (``pyspark_aws_kinesis.metadata``), which keeps it as JSON (``to_json`` / ``from_json``: a stored format,
read back by later versions, so fields are only ever added, optional); the driver plans the next batch from it
(``ShardRead.next_start``, ``stop``) and reports what it found (lag, data loss, KPL sub-records out of range).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..positions import AFTER_SEQUENCE_NUMBER, SHARD_END, WHOLE_RECORD, Position

# Why a batch's read of a shard stopped (``ShardRead.stop``); the driver plans the next batch from it.
STOP_LIMIT = "limit"  # maxFetchRecordsPerShard / maxRecordsPerTrigger reached: more records are waiting
STOP_TIME = "time"  # maxFetchTimePerShardSec spent: more records are probably waiting
STOP_BOUND = "bound"  # an answer held a record that arrived after the plan (or AvailableNow's start), not at the tip
STOP_CAUGHT_UP = "caughtUp"  # at the tip: an empty answer, or one short of its Limit with MillisBehindLatest 0
STOP_SHARD_END = "shardEnd"  # a closed shard read to its end (or a shard that vanished)
STOP_END = "end"  # a fixed end reached: a replay's recorded last record, a batch read's ending position
# Stops after which records wait, so the next plan reads the shard without a probe (AvailableNow's bound probes
# anyway: source.planner._find_waiting).
MORE_WAITING = frozenset({STOP_LIMIT, STOP_TIME, STOP_BOUND})
# Call starts kept per read (``ShardRead.call_starts_ms``): its calls start at least 200 ms apart, so older ones
# are out of AWS's second before any later call.
CALLS_KEPT = 5


@dataclass(frozen=True)
class DataLossEvent:
    """Records a read found gone at ``position`` (``kind``: "position gone" or "shard gone"), with
    ``kinesis.failOnDataLoss=false``: the read went on from the oldest record, or not at all."""

    position: Position
    kind: str

    def to_json(self) -> dict[str, Any]:
        return {"position": self.position.to_json(), "kind": self.kind}

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> DataLossEvent:
        return cls(Position.from_json(body["position"]), str(body["kind"]))


@dataclass(frozen=True)
class ShardRead:
    """Where one batch's read of one shard started and stopped.

    ``last_*`` name the last user record returned (None when the batch returned nothing from the shard);
    ``last_complete`` says it was the final user record of its Kinesis record, so the next batch may start after
    the whole record; ``shard_end`` says the shard is closed and was read to its end; ``stop`` says why the
    read stopped (``STOP_*``). Optional (absent in older records): ``dropped_out_of_range`` counts KPL
    sub-records dropped because their hash key is outside the shard's range, ``data_loss`` says the read found
    its start gone (``kinesis.failOnDataLoss=false``); the driver logs and reports both. ``next_iterator`` is
    a GetRecords shard iterator pointing exactly at ``next_start()`` (the read consumed its last page whole),
    received at ``iterator_ms`` (wall clock): the next read or probe of the shard starts with it instead of
    GetShardIterator while it is fresh. It is a hint, not part of the range: two attempts may hold different ones.
    ``refused_calls`` counts the read's calls Kinesis refused for the shard's quota (the read backed off and
    went on); the driver reports them. ``call_starts_ms``: when the read's last GetRecords calls started (wall
    clock, oldest first, at most ``CALLS_KEPT``): the driver counts them in the shard's second before it probes the
    shard again, and hands the last (``last_call_ms``) to the next batch's read of the shard
    (``ShardTask.last_call_ms``), whose first call keeps ``kinesis.getRecords.fetchIntervalMs`` after it.
    ``paid_ms``: when the shard has paid back the bytes of the read's answers (wall clock; None: no GetRecords
    answer): the driver neither probes the shard nor starts its next read before then.
    """

    stream: str
    shard_id: str
    start: Position
    records: int
    last_sequence_number: str | None = None
    last_sub_sequence_number: int = WHOLE_RECORD
    last_complete: bool = True
    shard_end: bool = False
    millis_behind_latest: int | None = None
    stop: str | None = None
    dropped_out_of_range: int = 0
    data_loss: DataLossEvent | None = None
    next_iterator: str | None = None
    iterator_ms: int | None = None
    refused_calls: int = 0
    call_starts_ms: tuple[int, ...] = ()
    paid_ms: int | None = None

    @property
    def last_call_ms(self) -> int | None:
        """When the read's last GetRecords started (wall ms), if it made one."""
        return self.call_starts_ms[-1] if self.call_starts_ms else None

    def same_range(self, other: ShardRead) -> bool:
        """Both name the same records: same start, count and end (bookkeeping such as lag or why the read
        stopped may differ between two attempts that read the same records)."""
        return (self.start, self.records, self.next_start()) == (other.start, other.records, other.next_start())

    def next_start(self) -> Position:
        """Where the next batch starts reading this shard."""
        if self.shard_end:
            return Position(SHARD_END)
        if self.last_sequence_number is None:
            return self.start
        sub = WHOLE_RECORD if self.last_complete else self.last_sub_sequence_number
        return Position(AFTER_SEQUENCE_NUMBER, self.last_sequence_number, sub)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "stream": self.stream,
            "shardId": self.shard_id,
            "start": self.start.to_json(),
            "records": self.records,
            "lastSequenceNumber": self.last_sequence_number,
            "lastSubSequenceNumber": self.last_sub_sequence_number,
            "lastComplete": self.last_complete,
            "shardEnd": self.shard_end,
            "millisBehindLatest": self.millis_behind_latest,
            "stop": self.stop,
        }
        if self.dropped_out_of_range:
            body["droppedOutOfRange"] = self.dropped_out_of_range
        if self.data_loss is not None:
            body["dataLoss"] = self.data_loss.to_json()
        if self.next_iterator is not None:
            body["nextShardIterator"] = self.next_iterator
            body["iteratorMs"] = self.iterator_ms
        if self.refused_calls:
            body["refusedCalls"] = self.refused_calls
        if self.call_starts_ms:
            body["callStartsMs"] = list(self.call_starts_ms)
        if self.paid_ms is not None:
            body["paidMs"] = self.paid_ms
        return body

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> ShardRead:
        return cls(
            stream=body["stream"],
            shard_id=body["shardId"],
            start=Position.from_json(body["start"]),
            records=int(body["records"]),
            last_sequence_number=body.get("lastSequenceNumber"),
            last_sub_sequence_number=int(body.get("lastSubSequenceNumber", WHOLE_RECORD)),
            last_complete=bool(body.get("lastComplete", True)),
            shard_end=bool(body.get("shardEnd", False)),
            millis_behind_latest=body.get("millisBehindLatest"),
            stop=body.get("stop"),
            dropped_out_of_range=int(body.get("droppedOutOfRange", 0)),
            data_loss=DataLossEvent.from_json(body["dataLoss"]) if body.get("dataLoss") else None,
            next_iterator=body.get("nextShardIterator"),
            iterator_ms=body.get("iteratorMs"),
            refused_calls=int(body.get("refusedCalls", 0)),
            call_starts_ms=_call_starts(body),
            paid_ms=body.get("paidMs"),
        )


def _call_starts(body: dict[str, Any]) -> tuple[int, ...]:
    """A recorded read's call starts; a read recorded before they were kept has its last call's alone."""
    if "callStartsMs" in body:
        return tuple(int(called) for called in body["callStartsMs"])
    return (int(body["lastCallMs"]),) if body.get("lastCallMs") is not None else ()
