"""One Spark task's write: the rows checked, planned into Kinesis records and sent, stream by stream.

Who calls it: ``sink.writer``'s ``write()``, in the task, with its rows as Arrow RecordBatches (``write_task``).
Every row is checked (``columns``) before anything is sent, then each target stream's rows are planned
(``planning``: plain, or KPL-aggregated per shard of a ``routing`` listing) and put through ``put_records`` on one or
more lanes; the counts go back in a SinkCommitMessage. Aggregates that a split or merge landed on a shard not
holding all their records are sent again for the shards that hold them now, for up to ``MAX_RESEND_ROUNDS`` rounds
(docs/sink.md, "Resharding"); delivery is at least once (docs/sink.md, "Delivery: at least once"), and with
``kinesis.sink.skipReplayedPartitions`` a partition that an earlier attempt of its micro-batch wrote whole, with the
same rows, is not sent again (``replay``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from ..errors import KinesisConnectorError
from ..kpl import UserRecord
from .columns import KinesisSinkInputError, SinkColumns, check_rows, data_as_binary, largest_record, split_by_stream
from .commit import SinkCommitMessage, log, log_to_stderr_if_unconfigured
from .entries import Entry, RecordLimits, raise_hint
from .planning import (
    PlannedRecords,
    misplaced_records,
    moved_aggregates,
    plan_aggregated,
    plan_plain,
)
from .put_records import OnStored, PutRecordsFailedError, PutStats, put_all
from .replay import ReplayCheck
from .routing import ShardRouter, open_shard_router, plain_shard_router, shard_buckets
from .settings import SinkSettings, kinesis_client
from .stream_limits import forget, limits_for

MAX_RESEND_ROUNDS = 3  # a stream that reshards under every one of these rounds fails the task (Spark retries it)


class ReshardResendError(KinesisConnectorError, RuntimeError):
    """User records kept landing on shards that do not hold them, through every re-send round."""


def _partition_id() -> int | None:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else None


def _collect(batches: Iterable[pa.RecordBatch]) -> pa.Table | None:
    """The task's whole input as one Arrow table (kept in Arrow form: compact, and checked in one pass)."""
    collected = [batch for batch in batches if batch.num_rows]
    return pa.Table.from_batches(collected) if collected else None


def write_task(batches: Iterable[pa.RecordBatch], columns: SinkColumns, settings: SinkSettings) -> SinkCommitMessage:
    """One task's write: check all rows, then send them stream by stream. Called by both writers' write()."""
    message = SinkCommitMessage(partition_id=_partition_id())
    table = _collect(batches)
    if table is None:
        return message
    check_rows(table, columns)
    by_stream = list(split_by_stream(table, columns, settings.stream_name))
    replay = ReplayCheck.of(settings.replay, settings.client, by_stream, columns, message)
    if replay is not None and replay.skip(table.num_rows):
        return message
    client = kinesis_client(settings)
    # Every stream's limits before anything is sent: a record too large for one stream fails the task whole.
    limits = {stream: _stream_limits(client, stream, rows, columns, settings) for stream, rows in by_stream}
    for stream, rows in by_stream:
        data = data_as_binary(rows, columns).to_pylist()
        keys = rows[columns.partition_key].to_pylist()
        hash_keys = rows[columns.explicit_hash_key].to_pylist() if columns.explicit_hash_key else [None] * len(keys)
        message.streams += (stream,)
        message.user_records += len(data)
        if settings.aggregation_enabled:
            _put_aggregated(client, stream, data, keys, hash_keys, settings, limits[stream], message)
        else:
            planned = plan_plain(data, keys, hash_keys, settings.max_connections)
            router = plain_shard_router(client, stream)
            message.put += _send(client, stream, planned, settings, limits[stream], router=router)
    if replay is not None:
        replay.note_written(table.num_rows)
    return message


def _stream_limits(
    client: Any, stream: str, rows: pa.Table, columns: SinkColumns, settings: SinkSettings
) -> RecordLimits:
    """The stream's limits, asked for only when a row is over 1 MiB; raises KinesisSinkInputError (one line: the
    size, the stream's maximum, how to raise it) when a row is over the stream's maximum."""
    largest = largest_record(rows, columns)
    limits = limits_for(client, stream, settings.retry, largest)
    if largest > limits.max_record_bytes:
        raise KinesisSinkInputError(
            f"Nothing was sent to Kinesis by this task: a record of {largest} bytes (data + partition key) is over "
            f"the maximum record size of stream '{stream}', {limits.describe()}{raise_hint(limits)}."
        )
    return limits


def _put_aggregated(
    client: Any,
    stream: str,
    data: list[bytes],
    keys: list[str],
    hash_keys: list[str | None],
    settings: SinkSettings,
    limits: RecordLimits,
    message: SinkCommitMessage,
) -> None:
    """Send aggregates per shard, then again the user records a reshard put on a shard that does not hold them."""
    router = open_shard_router(client, stream, settings)
    for round_ in range(MAX_RESEND_ROUNDS + 1):
        planned = plan_aggregated(data, keys, hash_keys, router, settings.max_connections)
        landings: list[tuple[Entry, str]] = []
        message.put += _send(client, stream, planned, settings, limits, landings, router)
        message.aggregates += planned.aggregates
        moved = moved_aggregates(landings)
        if not moved:
            return
        router = open_shard_router(client, stream, settings)  # the shards changed since the last listing
        misplaced = misplaced_records(moved, router)
        if not misplaced:
            return  # every moved aggregate landed on a child that holds all of its records
        if round_ == MAX_RESEND_ROUNDS:
            raise _resend_error(stream, misplaced, router)
        _log_resend(stream, len(moved), misplaced, round_ + 1)
        message.resent_records += len(misplaced)
        data = [record.data for record in misplaced]
        keys = [record.partition_key for record in misplaced]
        hash_keys = [record.explicit_hash_key for record in misplaced]


def _log_resend(stream: str, aggregates: int, misplaced: list[UserRecord], round_: int) -> None:
    log_to_stderr_if_unconfigured()
    log.warning(
        "aws-kinesis sink: %d aggregates to stream '%s' landed on shards other than planned (a split or merge "
        "since the shards were listed); re-sending the %d user records whose hash keys those shards do not hold "
        "(round %d of %d)",
        aggregates,
        stream,
        len(misplaced),
        round_,
        MAX_RESEND_ROUNDS,
    )


def _resend_error(stream: str, misplaced: list[UserRecord], router: ShardRouter) -> ReshardResendError:
    return ReshardResendError(
        f"Kinesis stream '{stream}' kept resharding while this task wrote to it: after {MAX_RESEND_ROUNDS} "
        f"re-sends, {len(misplaced)} user records still landed in KPL aggregates on shards whose hash-key range "
        f"does not hold them, where readers drop them (the stream now has {len(router)} open shards). The task "
        f"fails so that Spark retries it; records already stored stay in the stream (delivery is at-least-once). "
        f"Let the resharding finish, or set kinesis.sink.aggregationEnabled=false."
    )


def _send(
    client: Any,
    stream: str,
    planned: PlannedRecords,
    settings: SinkSettings,
    limits: RecordLimits,
    landings: list[tuple[Entry, str]] | None = None,
    router: ShardRouter | None = None,
) -> PutStats:
    """Each non-empty lane is one sequential put_all; lanes run on their own threads (kinesis.sink.maxConnections).

    ``landings`` receives (entry, ShardId) for each stored entry (list.append is safe across the lane threads).
    ``router``: the stream's shards, to pace each shard on its own (None: the stream as one).
    """

    def record_landing(entry: Entry, shard_id: str) -> None:
        assert landings is not None
        landings.append((entry, shard_id))

    on_stored: OnStored | None = record_landing if landings is not None else None
    lanes = [lane for lane in planned.lanes if lane]

    def put_lane(lane: list[Entry]) -> PutStats:
        bucket_of = shard_buckets(router) if router is not None else None
        try:
            return put_all(
                client, stream, lane, settings.retry, on_stored=on_stored, bucket_of=bucket_of, limits=limits
            )
        except PutRecordsFailedError as exc:
            if "ValidationException" in exc.error_codes:
                forget(client, stream)  # e.g. the maximum record size was lowered: the next task asks again
            raise

    if len(lanes) <= 1:
        return put_lane(lanes[0] if lanes else [])
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(lanes), thread_name_prefix="kinesis-sink") as pool:
        futures = [pool.submit(put_lane, lane) for lane in lanes]
        results = [future.exception() or future.result() for future in futures]
    total = PutStats()
    for result in results:
        if isinstance(result, BaseException):
            raise result
        total += result
    total.elapsed_s = time.monotonic() - started  # wall time of the parallel lanes, not the sum of their times
    return total
