"""The sink's input: which DataFrame columns it reads, and the checks every row passes before anything is sent.

``resolve_columns`` runs on the driver when a writer is built (``pyspark_aws_kinesis.sink.writer``), so a missing or
mistyped column fails the query before any task runs; ``check_rows`` and ``split_by_stream`` run in each task
(``pyspark_aws_kinesis.sink.task``) on the task's rows as one Arrow table.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import BinaryType, StringType, StructType

from ..errors import KinesisConnectorError
from ..shards import MAX_HASH_KEY
from .entries import LARGEST_RECORD_BYTES, MAX_PARTITION_KEY_CHARS

DATA, PARTITION_KEY, EXPLICIT_HASH_KEY, STREAM_NAME = "data", "partitionKey", "explicitHashKey", "streamName"
_HASH_KEY_PATTERN = r"^(0|[1-9][0-9]{0,38})$"  # a decimal integer of at most 39 digits, no sign, no padding
_COLUMN_HELP = (
    f"the aws-kinesis sink takes columns {DATA} (binary or string) and {PARTITION_KEY} (string), and optionally "
    f"{EXPLICIT_HASH_KEY} (string, a decimal 128-bit hash key) and {STREAM_NAME} (string, routes the row to that "
    f"stream when the option kinesis.streamName is not set); other columns are ignored"
)


class KinesisSinkInputError(KinesisConnectorError, ValueError):
    """Rows or columns the sink refuses before sending anything: says which column, what is wrong, how many."""


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
    # The option wins over the column (as Kafka's over `topic`): a DataFrame read from Kinesis, whose `streamName`
    # is its source, never loops back into it by accident.
    stream_name = None if default_stream else column(STREAM_NAME, (StringType,), required=False)
    if stream_name is None and not default_stream:
        problems.append(
            f"no target stream: set the option kinesis.streamName (or kinesis.streamARN) or add a string column "
            f"{STREAM_NAME}"
        )
    if problems:
        present = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in schema.fields) or "none"
        raise KinesisSinkInputError(f"{'; '.join(problems)}. {_COLUMN_HELP}. The DataFrame has columns: {present}.")
    assert data is not None and partition_key is not None
    return SinkColumns(
        data, partition_key, explicit_hash_key, stream_name, isinstance(by_name[DATA.lower()].dataType, StringType)
    )


def _count(mask: pa.ChunkedArray | pa.Array) -> int:
    """Rows where a boolean mask is true (nulls count as false)."""
    return int(pc.sum(mask).as_py() or 0)


def data_as_binary(table: pa.Table, columns: SinkColumns) -> pa.ChunkedArray:
    """The data column as bytes (a string column is written as UTF-8)."""
    data = table[columns.data]
    return pc.cast(data, pa.binary()) if columns.data_is_string else data


def record_sizes(data: pa.ChunkedArray, key: pa.ChunkedArray) -> pa.ChunkedArray:
    """Each row's size as a Kinesis record: data + partition key bytes (what the record limits count)."""
    return pc.add(pc.binary_length(data), pc.binary_length(key))


def largest_record(table: pa.Table, columns: SinkColumns) -> int:
    """The size of the table's largest record (0 for no rows)."""
    largest = pc.max(record_sizes(data_as_binary(table, columns), table[columns.partition_key])).as_py()
    return largest or 0


def check_rows(table: pa.Table, columns: SinkColumns) -> None:
    """Check every row of a task's input at once; raises KinesisSinkInputError listing each problem and count.

    Runs in the task before anything is sent, so bad input never leaves a half-written task behind.
    """
    rows = table.num_rows
    problems: list[str] = []
    data, key = data_as_binary(table, columns), table[columns.partition_key]
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
    sizes = record_sizes(data, key)
    oversized = _count(pc.greater(sizes, LARGEST_RECORD_BYTES))
    if oversized:
        problems.append(
            f"{oversized} of {rows} rows are over the Kinesis record limit of {LARGEST_RECORD_BYTES} bytes "
            f"(10 MiB, the most any stream takes; {columns.data} + {columns.partition_key}; largest "
            f"{pc.max(sizes).as_py()} bytes)"
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
