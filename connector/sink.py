"""The aws-kinesis sink: ``df.write.format("aws-kinesis")`` and ``df.writeStream.format("aws-kinesis")``.

Who calls what, when:
- ``connector.source.KinesisDataSource.writer()`` / ``streamWriter()`` build ``KinesisBatchWriter`` /
  ``KinesisStreamWriter`` on the driver when the query is planned: the DataFrame's columns and the options are
  checked there, so a missing or mistyped column fails the query before any task runs.
- Spark then pickles the writer to each task, whose ``write()`` receives the task's rows as Arrow
  RecordBatches, checks every row (null/empty partition key, record over 1 MiB, bad explicit hash key,
  missing stream name) before anything is sent, then puts the records through ``connector.put_records``,
  KPL-aggregated per target shard when ``kinesis.sink.aggregationEnabled`` is true (the default).
- ``commit()`` / ``abort()`` run on the driver with every task's ``SinkCommitMessage`` and log the counts.

Delivery is at-least-once: a task that fails after some calls succeeded, or is retried by Spark, sends its
records again; Kinesis has no transactions to undo them.
"""

from __future__ import annotations

import bisect
import logging
import sys
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from botocore.exceptions import ClientError
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, StringType, StructType

from connector import aws
from connector import options as opts
from connector.aws import ClientSettings
from connector.compat import STREAM_ARROW_WRITER_BASES
from connector.kpl import Aggregator, OutgoingRecord, hash_key_of
from connector.put_records import MAX_ENTRY_BYTES, MAX_PARTITION_KEY_CHARS, Entry, PutStats, put_all
from connector.retry import RetryPolicy, error_code
from connector.shards import list_shards, open_shards

log = logging.getLogger(__name__)

DATA, PARTITION_KEY, EXPLICIT_HASH_KEY, STREAM_NAME = "data", "partitionKey", "explicitHashKey", "streamName"
MAX_HASH_KEY = 2**128 - 1
_HASH_KEY_PATTERN = r"^(0|[1-9][0-9]{0,38})$"  # a decimal integer of at most 39 digits, no sign, no padding
_COLUMN_HELP = (
    f"the aws-kinesis sink takes columns {DATA} (binary or string) and {PARTITION_KEY} (string), and optionally "
    f"{EXPLICIT_HASH_KEY} (string, a decimal 128-bit hash key) and {STREAM_NAME} (string, routes the row to that "
    f"stream when the option kinesis.streamName is not set); other columns are ignored"
)


class KinesisSinkInputError(ValueError):
    """Rows or columns the sink refuses before sending anything: says which column, what is wrong, how many."""


# --- columns ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SinkColumns:
    """Where the sink finds each of its columns in the DataFrame (Spark matches names case-insensitively)."""

    data: str
    partition_key: str
    explicit_hash_key: str | None = None
    stream_name: str | None = None
    data_is_string: bool = False


def resolve_columns(schema: StructType, default_stream: str | None) -> SinkColumns:
    """Check the DataFrame's columns on the driver; raises KinesisSinkInputError naming every bad column.

    ``default_stream`` is the kinesis.streamName option: when set, every row goes there and a streamName column
    is ignored; when not, the streamName column is required and routes each row.
    """
    by_name = {f.name.lower(): f for f in schema.fields}
    problems: list[str] = []

    def column(name: str, allowed: tuple[type, ...], required: bool) -> str | None:
        found = by_name.get(name.lower())
        if found is None:
            if required:
                problems.append(f"column '{name}' is missing")
            return None
        if not isinstance(found.dataType, allowed):
            wanted = " or ".join(t.typeName() for t in allowed)
            problems.append(
                f"column '{found.name}' has type {found.dataType.simpleString()}, it must be {wanted} "
                f"(cast it, e.g. col('{found.name}').cast('{allowed[0].typeName()}'))"
            )
        return found.name

    data = column(DATA, (BinaryType, StringType), required=True)
    partition_key = column(PARTITION_KEY, (StringType,), required=True)
    explicit_hash_key = column(EXPLICIT_HASH_KEY, (StringType,), required=False)
    # Like Kafka's sink and its `topic` column: the option wins over the column. So a DataFrame read from
    # Kinesis, which carries its source stream in `streamName`, never loops back into its source by accident.
    stream_name = None if default_stream else column(STREAM_NAME, (StringType,), required=False)
    if stream_name is None and not default_stream:
        problems.append(f"no target stream: set the option kinesis.streamName or add a string column {STREAM_NAME}")
    if problems:
        present = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in schema.fields) or "none"
        raise KinesisSinkInputError(f"{'; '.join(problems)}. {_COLUMN_HELP}. The DataFrame has columns: {present}.")
    assert data is not None and partition_key is not None
    return SinkColumns(
        data, partition_key, explicit_hash_key, stream_name, isinstance(by_name[DATA.lower()].dataType, StringType)
    )


# --- rows -------------------------------------------------------------------------------------------------


def _count(mask: pa.ChunkedArray | pa.Array) -> int:
    """Rows where a boolean mask is true (nulls count as false)."""
    return int(pc.sum(mask).as_py() or 0)


def _data_as_binary(table: pa.Table, columns: SinkColumns) -> pa.ChunkedArray:
    data = table[columns.data]
    return pc.cast(data, pa.binary()) if columns.data_is_string else data


def check_rows(table: pa.Table, columns: SinkColumns) -> None:
    """Check every row of a task's input at once; raises KinesisSinkInputError listing each problem and count.

    Runs in the task before anything is sent, so bad input never leaves a half-written task behind.
    """
    rows = table.num_rows
    problems: list[str] = []
    data, key = _data_as_binary(table, columns), table[columns.partition_key]
    if data.null_count:
        problems.append(f"column '{columns.data}' is null in {data.null_count} of {rows} rows")
    empty_keys = key.null_count + _count(pc.equal(key, ""))
    if empty_keys:
        problems.append(f"column '{columns.partition_key}' is null or empty in {empty_keys} of {rows} rows")
    long_keys = _count(pc.greater(pc.utf8_length(key), MAX_PARTITION_KEY_CHARS))
    if long_keys:
        problems.append(
            f"column '{columns.partition_key}' is longer than {MAX_PARTITION_KEY_CHARS} characters in "
            f"{long_keys} of {rows} rows"
        )
    sizes = pc.add(pc.binary_length(data), pc.binary_length(key))
    oversized = _count(pc.greater(sizes, MAX_ENTRY_BYTES))
    if oversized:
        problems.append(
            f"{oversized} of {rows} rows are over the Kinesis record limit of {MAX_ENTRY_BYTES} bytes "
            f"({columns.data} + {columns.partition_key}; largest {pc.max(sizes).as_py()} bytes)"
        )
    if columns.explicit_hash_key:
        problems += _hash_key_problems(table[columns.explicit_hash_key], columns.explicit_hash_key, rows)
    if columns.stream_name:
        streams = table[columns.stream_name]
        missing = streams.null_count + _count(pc.equal(streams, ""))
        if missing:
            problems.append(
                f"column '{columns.stream_name}' is null or empty in {missing} of {rows} rows (or set the option "
                f"kinesis.streamName to send every row to one stream)"
            )
    if problems:
        raise KinesisSinkInputError(f"Nothing was sent to Kinesis by this task: {'; '.join(problems)}.")


def _hash_key_problems(hash_keys: pa.ChunkedArray, name: str, rows: int) -> list[str]:
    """Non-null explicit hash keys must be decimal integers in [0, 2**128 - 1]; nulls mean 'use the key'."""
    well_formed = pc.match_substring_regex(hash_keys, _HASH_KEY_PATTERN)
    malformed = rows - hash_keys.null_count - _count(well_formed)
    # Same-length digit strings compare like numbers, so only 39-digit keys can pass the maximum.
    too_big = _count(
        pc.and_(
            pc.and_(well_formed, pc.equal(pc.utf8_length(hash_keys), len(str(MAX_HASH_KEY)))),
            pc.greater(hash_keys, str(MAX_HASH_KEY)),
        )
    )
    bad = malformed + too_big
    if not bad:
        return []
    return [f"column '{name}' is not a decimal integer between 0 and 2^128-1 in {bad} of {rows} rows"]


# --- settings ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SinkSettings:
    """The sink's options, parsed once on the driver and pickled into every task."""

    stream_name: str | None
    client: ClientSettings  # endpoint, region, credentials, retry policy: connector.aws builds the client
    aggregation_enabled: bool = True
    max_connections: int = 1

    @property
    def retry(self) -> RetryPolicy:
        return self.client.retry


# --- routing records to shards ----------------------------------------------------------------------------


class ShardRouter:
    """Maps a 128-bit hash key to the index of the open shard whose hash-key range holds it.

    Built in each task from ``connector.shards.list_shards`` when aggregating: an aggregate is routed by its
    first record's key, so each aggregate may only hold records of one shard. (``shards.shard_for_hash_key``
    answers the same question but rebuilds its index per call; here it is built once for a task's rows.)
    """

    def __init__(self, ranges: Iterable[tuple[int, int]]):
        self._ranges = sorted(ranges)
        if not self._ranges:
            raise ValueError("a stream with no open shard cannot take records")
        self._starts = [start for start, _ in self._ranges]

    def __len__(self) -> int:
        return len(self._ranges)

    def shard_of(self, hash_key: int) -> int:
        index = bisect.bisect_right(self._starts, hash_key) - 1
        if index < 0 or hash_key > self._ranges[index][1]:
            raise ValueError(f"hash key {hash_key} is outside every open shard's range (is the stream resharding?)")
        return index


def lane_of_key(partition_key: str, lanes: int) -> int:
    """Lane (concurrent PutRecords sequence) for a non-aggregated record: same key, same lane, kept in order."""
    return zlib.crc32(partition_key.encode("utf-8")) % lanes if lanes > 1 else 0


@dataclass
class PlannedRecords:
    """What one task sends to one stream: Kinesis records split into lanes, plus counts for the commit."""

    lanes: list[list[Entry]]
    user_records: int = 0
    aggregates: int = 0


def plan_plain(data: list[bytes], keys: list[str], hash_keys: list[str | None], lanes: int) -> PlannedRecords:
    """One Kinesis record per row; rows of one partition key share a lane so their order holds."""
    planned = PlannedRecords([[] for _ in range(lanes)], user_records=len(data))
    for payload, key, hash_key in zip(data, keys, hash_keys, strict=True):
        planned.lanes[lane_of_key(key, lanes)].append(Entry(payload, key, hash_key))
    return planned


def plan_aggregated(
    data: list[bytes], keys: list[str], hash_keys: list[str | None], router: ShardRouter, lanes: int
) -> PlannedRecords:
    """KPL aggregates, one Aggregator per open shard so each aggregate lands on its records' shard.

    Records with an explicit hash key get Aggregators of their own: aws-kinesis-agg's deaggregator gives a
    record without one the table's first explicit hash key when an aggregate mixes both kinds.
    """
    aggregators: dict[tuple[int, bool], Aggregator] = {}
    planned = PlannedRecords([[] for _ in range(lanes)], user_records=len(data))
    shard_of_key: dict[str, int] = {}  # partition keys repeat a lot; MD5 once per key

    def emit(shard: int, record: OutgoingRecord) -> None:
        planned.lanes[shard % lanes].append(Entry(record.data, record.partition_key, record.explicit_hash_key))
        planned.aggregates += record.user_records > 1

    for payload, key, hash_key in zip(data, keys, hash_keys, strict=True):
        if len(router) == 1:
            shard = 0
        elif hash_key is not None:
            shard = router.shard_of(int(hash_key))
        else:
            shard = shard_of_key.get(key)
            if shard is None:
                shard = shard_of_key[key] = router.shard_of(hash_key_of(key))
        aggregator = aggregators.get((shard, hash_key is None))
        if aggregator is None:
            aggregator = aggregators[shard, hash_key is None] = Aggregator()
        for record in aggregator.add(payload, key, hash_key):
            emit(shard, record)
    for (shard, _), aggregator in aggregators.items():
        record = aggregator.flush()
        if record is not None:
            emit(shard, record)
    return planned


# --- commit messages --------------------------------------------------------------------------------------


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    """What one task wrote: returned by ``write()`` in the task, handed to ``commit()`` on the driver."""

    partition_id: int | None
    streams: tuple[str, ...] = ()
    user_records: int = 0  # rows written
    aggregates: int = 0  # Kinesis records that carry more than one row
    put: PutStats = field(default_factory=PutStats)  # Kinesis records, bytes, calls, retries

    def describe(self) -> str:
        put = self.put
        return (
            f"{self.user_records} records in {put.records} Kinesis records ({self.aggregates} aggregates, "
            f"{put.bytes} bytes) to {', '.join(self.streams) or 'no stream'}; {put.calls} PutRecords calls, "
            f"{put.retried_entries} entries and {put.retried_calls} calls retried, "
            f"{put.elapsed_s:.2f} s sending (summed over tasks)"
        )


def summarize(messages: Iterable[WriterCommitMessage | None]) -> tuple[SinkCommitMessage, int]:
    """All tasks' counts summed into one message, and how many tasks reported."""
    total = SinkCommitMessage(partition_id=None)
    streams: set[str] = set()
    tasks = 0
    for message in messages:
        if not isinstance(message, SinkCommitMessage):
            continue  # a task that failed before reporting sends None
        tasks += 1
        streams.update(message.streams)
        total.user_records += message.user_records
        total.aggregates += message.aggregates
        total.put += message.put
    total.streams = tuple(sorted(streams))
    return total, tasks


def _log_to_stderr_if_unconfigured() -> None:
    """Spark's Python workers configure no logging; without a handler our INFO lines would vanish."""
    if not log.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)


# --- the task side ----------------------------------------------------------------------------------------


def _partition_id() -> int | None:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else None


def _collect(batches: Iterable[pa.RecordBatch]) -> pa.Table | None:
    """The task's whole input as one Arrow table (kept in Arrow form: compact, and checked in one pass)."""
    collected = [batch for batch in batches if batch.num_rows]
    return pa.Table.from_batches(collected) if collected else None


def split_by_stream(
    table: pa.Table, columns: SinkColumns, default_stream: str | None
) -> Iterator[tuple[str, pa.Table]]:
    """(stream, rows for it) pairs, rows in input order: all rows to the option's stream, else by the column."""
    if columns.stream_name is None:
        assert default_stream
        yield default_stream, table
        return
    rows_of: dict[str, list[int]] = {}
    for row, name in enumerate(table[columns.stream_name].to_pylist()):
        rows_of.setdefault(name, []).append(row)
    for name, rows in rows_of.items():
        yield name, table if len(rows) == table.num_rows else table.take(rows)


def write_task(batches: Iterable[pa.RecordBatch], columns: SinkColumns, settings: SinkSettings) -> SinkCommitMessage:
    """One task's write: check all rows, then send them stream by stream. Called by both writers' write()."""
    message = SinkCommitMessage(partition_id=_partition_id())
    table = _collect(batches)
    if table is None:
        return message
    check_rows(table, columns)
    client = kinesis_client(settings)
    for stream, rows in split_by_stream(table, columns, settings.stream_name):
        planned = _plan(client, stream, rows, columns, settings)
        message.put += _send(client, stream, planned, settings)
        message.streams += (stream,)
        message.user_records += planned.user_records
        message.aggregates += planned.aggregates
    return message


def _plan(client, stream: str, rows: pa.Table, columns: SinkColumns, settings: SinkSettings) -> PlannedRecords:
    data = _data_as_binary(rows, columns).to_pylist()
    keys = rows[columns.partition_key].to_pylist()
    hash_keys = rows[columns.explicit_hash_key].to_pylist() if columns.explicit_hash_key else [None] * len(keys)
    lanes = settings.max_connections
    if not settings.aggregation_enabled:
        return plan_plain(data, keys, hash_keys, lanes)
    return plan_aggregated(data, keys, hash_keys, open_shard_router(client, stream, settings), lanes)


def _send(client, stream: str, planned: PlannedRecords, settings: SinkSettings) -> PutStats:
    """Each non-empty lane is one sequential put_all; lanes run on their own threads (kinesis.sink.maxConnections)."""
    lanes = [lane for lane in planned.lanes if lane]
    if len(lanes) <= 1:
        return put_all(client, stream, lanes[0] if lanes else [], settings.retry)
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(lanes), thread_name_prefix="kinesis-sink") as pool:
        futures = [pool.submit(put_all, client, stream, lane, settings.retry) for lane in lanes]
        results = [future.exception() or future.result() for future in futures]
    total = PutStats()
    for result in results:
        if isinstance(result, BaseException):
            raise result
        total += result
    total.elapsed_s = time.monotonic() - started  # wall time of the parallel lanes, not the sum of their times
    return total


# --- the Spark-facing writers -----------------------------------------------------------------------------


class _KinesisWriter:
    """Shared by both writers: built on the driver (columns and options checked there), pickled to tasks."""

    def __init__(self, schema: StructType, options: Mapping[str, str]):
        self.settings = sink_settings(options)
        self.columns = resolve_columns(schema, self.settings.stream_name)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return write_task(iterator, self.columns, self.settings)


class KinesisBatchWriter(_KinesisWriter, DataSourceArrowWriter):
    """``df.write.format("aws-kinesis")``: one job, every task's counts logged when Spark commits."""

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _log_outcome("batch write committed", messages)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _log_outcome("batch write aborted (records already sent stay in the stream)", messages, logging.WARNING)


class KinesisStreamWriter(_KinesisWriter, *STREAM_ARROW_WRITER_BASES):
    """``df.writeStream.format("aws-kinesis")``: each micro-batch's counts logged with its batch id."""

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log_outcome(f"batch {batchId} committed", messages)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log_outcome(f"batch {batchId} aborted (records already sent stay in the stream)", messages, logging.WARNING)


def _log_outcome(what: str, messages: list[WriterCommitMessage | None], level: int = logging.INFO) -> None:
    _log_to_stderr_if_unconfigured()
    total, tasks = summarize(messages)
    log.log(level, "aws-kinesis sink: %s: %d tasks wrote %s", what, tasks, total.describe())


# --- options, clients, shards ----------------------------------------------------------------------------


def sink_settings(options: Mapping[str, str]) -> SinkSettings:
    """Parse Spark's raw options on the driver; raises OptionError naming any bad option and value."""
    parsed = opts.parse_options(options, opts.Side.SINK)
    connections = parsed[opts.MAX_CONNECTIONS.key]
    return SinkSettings(
        stream_name=parsed[opts.STREAM_NAME.key],
        aggregation_enabled=parsed[opts.AGGREGATION_ENABLED.key],
        max_connections=connections,
        client=ClientSettings.from_options(parsed, max_pool_connections=max(10, connections)),
    )


def kinesis_client(settings: SinkSettings) -> Any:
    return aws.kinesis_client(settings.client)


def open_shard_router(client: Any, stream: str, settings: SinkSettings) -> ShardRouter:
    """The stream's open shards, listed once per task and stream (aggregation only).

    A missing stream raises connector.shards.StreamNotFoundError (it names the stream); denied access is turned
    into a PermissionError that says which permission aggregation needs and how to do without it.
    """
    try:
        shards = list_shards(client, stream, settings.retry)
    except ClientError as exc:
        if error_code(exc) not in ("AccessDeniedException", "UnrecognizedClientException"):
            raise
        raise PermissionError(
            f"ListShards on Kinesis stream '{stream}' was refused ({error_code(exc)}) at "
            f"{settings.client.where()}: with kinesis.sink.aggregationEnabled=true the sink needs kinesis:ListShards "
            f"as well as kinesis:PutRecords on the stream (or set kinesis.sink.aggregationEnabled=false)"
        ) from exc
    return ShardRouter((shard.starting_hash_key, shard.ending_hash_key) for shard in open_shards(shards))
