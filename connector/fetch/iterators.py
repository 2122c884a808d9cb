"""Opening a shard iterator at a position, and telling lost data apart from other errors.

Who calls it: ``fetch.polling.transport.GetRecordsTransport``, ``fetch.fanout.subscriber.ShardSubscriber`` and the
driver's ``probe.ShardProber``, for the same answers: which GetShardIterator request a position means, what to do
when Kinesis thinks an AT_TIMESTAMP is in its future, and whether an error means the position's records are gone
(``kinesis.failOnDataLoss``). A ``Handoff`` (an iterator held at a position) or a ``HeldAnswer`` (a probe's whole
answer) spares the next read of that position its GetShardIterator: docs/source.md, "Iterator handoff".
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ..clock import now_ms
from ..errors import KinesisConnectorError
from ..positions import AFTER_SEQUENCE_NUMBER, AT_SEQUENCE_NUMBER, AT_TIMESTAMP, SHARD_END, WHOLE_RECORD, Position
from ..retry import RetryPolicy, error_code, error_message
from ..stream_ids import stream_param

log = logging.getLogger(__name__)

FUTURE_TIMESTAMP_WAITS = 50
FUTURE_TIMESTAMP_PAUSE_S = 0.2
ITERATOR_MAX_AGE_MS = 240_000  # Kinesis iterators expire after 5 minutes: a minute's margin for clocks and queues
# GetRecords' answers to an iterator it will not take (expired, malformed, of a gone or re-created stream):
# GetShardIterator at the position then says what really happened.
REFUSED_ITERATOR = frozenset({"ExpiredIteratorException", "InvalidArgumentException", "ResourceNotFoundException"})


@dataclass(frozen=True)
class Handoff:
    """A GetRecords shard iterator that points exactly at ``position``, received at ``at_ms`` (wall clock, ms)."""

    position: Position
    iterator: str
    at_ms: int

    @classmethod
    def received(cls, position: Position, iterator: str) -> Handoff:
        """An iterator at ``position`` Kinesis sent just now."""
        return cls(position, iterator, now_ms())

    def usable_for(self, position: Position) -> bool:
        """It stands for ``position`` and has not expired (by our margin)."""
        return position == self.position and now_ms() - self.at_ms < ITERATOR_MAX_AGE_MS


@dataclass(frozen=True)
class HeldAnswer:
    """A GetRecords answer for ``position``: its raw body (JSON, as Kinesis sent it), the ``Limit`` it was asked
    with (a full answer may have more behind it) and when its call started (wall clock, ms). Its records never
    change; its NextShardIterator expires like any iterator."""

    position: Position
    body: bytes
    limit: int
    called_ms: int

    def usable_for(self, position: Position) -> bool:
        """It answers ``position`` and the iterator inside it has not expired (by our margin)."""
        return position == self.position and now_ms() - self.called_ms < ITERATOR_MAX_AGE_MS


def freshest(position: Position, *candidates: Handoff | None) -> Handoff | None:
    """The most recently received of ``candidates`` still usable at ``position`` (the first on a tie), or None."""
    best = None
    for handoff in candidates:  # a loop, not a list and max(): the driver asks it twice a shard each trigger
        if handoff is not None and handoff.usable_for(position) and (best is None or handoff.at_ms > best.at_ms):
            best = handoff
    return best


def refused_iterator(exc: ClientError, inherited: bool) -> bool:
    """GetRecords refused the iterator itself: open a new one at the same position instead of failing. Any
    iterator can expire; one not just received from Kinesis (``inherited``: handed over, or kept from an earlier
    call) may also be malformed, foreign or of a gone stream, where a fresh one's refusal is a real error."""
    code = error_code(exc)
    return code == "ExpiredIteratorException" or (inherited and code in REFUSED_ITERATOR)


class DataLossError(KinesisConnectorError, RuntimeError):
    """Records the query should read are gone, and ``kinesis.failOnDataLoss`` is true."""


class ShardGoneError(KinesisConnectorError, RuntimeError):
    """The shard itself no longer exists (its stream was deleted, or it expired past retention)."""


class PositionGoneError(KinesisConnectorError, RuntimeError):
    """The record a position points at is no longer in the shard (trimmed, or the stream was re-created)."""


def iterator_request(position: Position) -> dict[str, Any]:
    """GetShardIterator arguments for a position (AT/AFTER inside an aggregate re-read the record and skip)."""
    if position.kind == AT_TIMESTAMP:
        assert position.timestamp_ms is not None
        return {"ShardIteratorType": AT_TIMESTAMP, "Timestamp": position.timestamp_ms / 1000.0}
    if position.kind == AFTER_SEQUENCE_NUMBER and position.sub_sequence_number == WHOLE_RECORD:
        return {"ShardIteratorType": AFTER_SEQUENCE_NUMBER, "StartingSequenceNumber": position.sequence_number}
    if position.kind in (AT_SEQUENCE_NUMBER, AFTER_SEQUENCE_NUMBER):
        return {"ShardIteratorType": AT_SEQUENCE_NUMBER, "StartingSequenceNumber": position.sequence_number}
    if position.kind == SHARD_END:
        raise ValueError("a finished shard (SHARD_END) has nothing to read")
    return {"ShardIteratorType": position.kind}


# AWS (and kinesalite): "timestampInMillis parameter cannot be greater than the currentTimestampInMillis";
# kinesis-mock: "Timestamp cannot be in the future".
_FUTURE_TIMESTAMP_WORDINGS = ("cannot be greater than", "cannot be in the future")


def is_future_timestamp(exc: ClientError) -> bool:
    message = error_message(exc)
    return error_code(exc) == "InvalidArgumentException" and any(w in message for w in _FUTURE_TIMESTAMP_WORDINGS)


def classify_missing(exc: ClientError, position: Position) -> Exception | None:
    """ShardGoneError / PositionGoneError for an error that says so, else None.

    AWS answers a trimmed or foreign sequence number with InvalidArgumentException about the
    StartingSequenceNumber; kinesis-mock with ResourceNotFoundException "Unable to find record with provided
    SequenceNumber". A missing shard or stream is ResourceNotFoundException everywhere.
    """
    code = error_code(exc)
    message = error_message(exc)
    by_sequence = position.kind in (AT_SEQUENCE_NUMBER, AFTER_SEQUENCE_NUMBER)
    names_sequence = "sequencenumber" in message.replace(" ", "").lower()
    if by_sequence and names_sequence and code in ("InvalidArgumentException", "ResourceNotFoundException"):
        return PositionGoneError(message)
    if code == "ResourceNotFoundException":
        return ShardGoneError(message)
    return None


def open_iterator(kinesis: Any, stream: str, shard_id: str, position: Position, retry: RetryPolicy, what: str) -> str:
    """A shard iterator at ``position``; raises ShardGoneError / PositionGoneError when those are gone.

    The driver's clock may run ahead of Kinesis': an AT_TIMESTAMP made from it (LATEST) can be a few
    milliseconds in Kinesis' future, which it refuses; we wait for Kinesis' clock to pass it.
    """
    request = iterator_request(position)
    for _attempt in range(FUTURE_TIMESTAMP_WAITS):
        try:
            answer = retry.call(
                kinesis.get_shard_iterator,
                **stream_param(stream),
                ShardId=shard_id,
                what=f"GetShardIterator on {what}",
                **request,
            )
            return answer["ShardIterator"]
        except ClientError as exc:
            if is_future_timestamp(exc):
                time.sleep(FUTURE_TIMESTAMP_PAUSE_S)
                continue
            missing = classify_missing(exc, position)
            if missing is not None:
                raise missing from exc
            raise
    raise RuntimeError(
        f"GetShardIterator on {what}: Kinesis kept refusing AT_TIMESTAMP {position.timestamp_ms} as in the "
        f"future for {FUTURE_TIMESTAMP_WAITS * FUTURE_TIMESTAMP_PAUSE_S:.0f} s; is this machine's clock ahead?"
    )


def data_loss(what: str, position: Position, gone: Exception, fail: bool, instead: str) -> None:
    """Fail (``fail``: kinesis.failOnDataLoss=true) or log a warning that says what is skipped and what follows."""
    if isinstance(gone, ShardGoneError):
        problem = f"{what} no longer exists ({gone})"
    else:
        problem = f"the position {position.to_json()} on {what} is no longer in the shard ({gone})"
    message = f"{problem}: records not yet read there are lost (trimmed past retention, or the stream was re-created)"
    if fail:
        raise DataLossError(f"{message}. Set kinesis.failOnDataLoss=false to continue with {instead} instead.")
    log.warning("%s; kinesis.failOnDataLoss is false, so the query continues with %s", message, instead)
