"""The sink refuses bad columns on the driver and bad rows in the task, naming column, problem and row count."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructField, StructType

from pyspark_aws_kinesis.sink.columns import (
    KinesisSinkInputError,
    SinkColumns,
    check_rows,
    resolve_columns,
    split_by_stream,
)

TEN_MIB = 10 * 1024 * 1024
BINARY_SCHEMA = StructType([StructField("data", BinaryType()), StructField("partitionKey", StringType())])


def _schema(**columns) -> StructType:
    return StructType([StructField(name, kind) for name, kind in columns.items()])


# --- columns, on the driver -------------------------------------------------------------------------------


def test_binary_and_string_data_are_accepted_and_names_match_case_insensitively() -> None:
    columns = resolve_columns(_schema(DATA=StringType(), partitionkey=StringType(), extra=IntegerType()), "s")
    assert columns == SinkColumns("DATA", "partitionkey", data_is_string=True)
    assert not resolve_columns(BINARY_SCHEMA, "s").data_is_string


def test_optional_columns_are_found() -> None:
    schema = _schema(
        data=BinaryType(), partitionKey=StringType(), explicitHashKey=StringType(), streamName=StringType()
    )
    columns = resolve_columns(schema, None)
    assert (columns.explicit_hash_key, columns.stream_name) == ("explicitHashKey", "streamName")


def test_the_stream_option_wins_over_the_stream_column() -> None:
    # A frame read from Kinesis carries its source stream in streamName: it must not be written back there.
    schema = _schema(data=BinaryType(), partitionKey=StringType(), streamName=IntegerType())
    assert resolve_columns(schema, "target").stream_name is None


def test_a_missing_column_is_named_with_what_the_sink_takes() -> None:
    with pytest.raises(KinesisSinkInputError) as info:
        resolve_columns(_schema(data=BinaryType(), key=StringType()), "s")
    message = str(info.value)
    assert "column 'partitionKey' is missing" in message
    assert "partitionKey (string)" in message and "The DataFrame has columns: data binary, key string" in message


def test_mistyped_columns_are_all_named_with_their_type() -> None:
    schema = _schema(data=IntegerType(), partitionKey=IntegerType(), explicitHashKey=IntegerType())
    with pytest.raises(KinesisSinkInputError) as info:
        resolve_columns(schema, "s")
    message = str(info.value)
    assert "column 'data' has type int, it must be binary or string" in message
    assert "column 'partitionKey' has type int, it must be string" in message
    assert "column 'explicitHashKey' has type int, it must be string" in message


def test_no_stream_option_and_no_stream_column_is_refused() -> None:
    with pytest.raises(KinesisSinkInputError, match=r"kinesis.streamName \(or kinesis.streamARN\) or add a string"):
        resolve_columns(BINARY_SCHEMA, None)


# --- rows, in the task ------------------------------------------------------------------------------------


def _table(**columns) -> pa.Table:
    return pa.table(columns)


def _check(table: pa.Table) -> None:
    names = set(table.column_names)
    columns = SinkColumns(
        "data",
        "partitionKey",
        "explicitHashKey" if "explicitHashKey" in names else None,
        "streamName" if "streamName" in names else None,
        pa.types.is_string(table["data"].type),
    )
    check_rows(table, columns)


def test_good_rows_pass() -> None:
    _check(_table(data=pa.array([b"", b"x"]), partitionKey=["a", "b"], explicitHashKey=[None, str(2**128 - 1)]))


def test_null_or_empty_partition_keys_are_counted() -> None:
    table = _table(data=[b"1", b"2", b"3", b"4"], partitionKey=["a", None, "", None])
    with pytest.raises(KinesisSinkInputError, match=r"column 'partitionKey' is null or empty in 3 of 4 rows"):
        _check(table)


def test_null_data_is_counted() -> None:
    with pytest.raises(KinesisSinkInputError, match=r"column 'data' is null in 1 of 2 rows"):
        _check(_table(data=pa.array([None, b"x"], pa.binary()), partitionKey=["a", "b"]))


def test_records_over_10_mib_including_the_key_are_counted() -> None:
    # 10 MiB of data is fine alone (on a stream raised to 10 MiB), but not with its partition key.
    table = _table(data=[b"x" * TEN_MIB, b"x" * (TEN_MIB - 1), b"ok"], partitionKey=["ab", "a", "a"])
    with pytest.raises(KinesisSinkInputError) as info:
        _check(table)
    assert f"1 of 3 rows are over the Kinesis record limit of {TEN_MIB} bytes (10 MiB" in str(info.value)
    assert f"largest {TEN_MIB + 2} bytes" in str(info.value)


def test_string_data_is_measured_in_utf8_bytes() -> None:
    table = _table(data=["é" * (TEN_MIB // 2)], partitionKey=["k"])  # 2 bytes per character
    with pytest.raises(KinesisSinkInputError, match=r"1 of 1 rows are over"):
        _check(table)


def test_partition_keys_over_256_characters_are_counted() -> None:
    with pytest.raises(KinesisSinkInputError, match=r"longer than 256 characters in 1 of 2 rows"):
        _check(_table(data=[b"1", b"2"], partitionKey=["k" * 257, "k" * 256]))


@pytest.mark.parametrize("bad", ["-1", "1.5", "abc", "", "007", str(2**128), "9" * 40])
def test_bad_explicit_hash_keys_are_counted(bad: str) -> None:
    table = _table(data=[b"1", b"2", b"3"], partitionKey=["a", "b", "c"], explicitHashKey=[bad, "12", None])
    with pytest.raises(KinesisSinkInputError, match=r"'explicitHashKey' is not a decimal integer .* in 1 of 3 rows"):
        _check(table)


def test_rows_routed_by_column_need_a_stream_name() -> None:
    _check(_table(data=[b"1"], partitionKey=["a"], streamName=["s1"]))
    table = _table(data=[b"1", b"2", b"3"], partitionKey=["a", "b", "c"], streamName=["s1", None, ""])
    with pytest.raises(KinesisSinkInputError, match=r"'streamName' is null or empty in 2 of 3 rows \(or set"):
        _check(table)


def test_every_problem_is_reported_at_once() -> None:
    table = _table(data=pa.array([None, b"x"], pa.binary()), partitionKey=[None, "k" * 300])
    with pytest.raises(KinesisSinkInputError) as info:
        _check(table)
    message = str(info.value)
    assert message.startswith("Nothing was sent to Kinesis by this task")
    assert "'data' is null in 1" in message and "null or empty in 1" in message and "longer than 256" in message


def test_rows_are_split_by_stream_in_order() -> None:
    table = _table(data=[b"1", b"2", b"3", b"4"], partitionKey=["a"] * 4, streamName=["x", "y", "x", "y"])
    columns = SinkColumns("data", "partitionKey", stream_name="streamName")
    split = {stream: rows["data"].to_pylist() for stream, rows in split_by_stream(table, columns, None)}
    assert split == {"x": [b"1", b"3"], "y": [b"2", b"4"]}
