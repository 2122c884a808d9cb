"""``pyspark_aws_kinesis.fetch.arrow_columns``: the Arrow columns of a decoded page built cheaply from its Python
lists, equal to pyarrow's own: binary columns from one joined buffer and its offsets (or pyarrow's way when the
items are small or past int32 offsets), the bytes of a column's values, and arrival times in microseconds; in the
driver's process (``build_from_buffers``) every column from buffers, without importing pandas. The binary column
tests go through ``fetch.decode``, which builds its columns with it."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest

from pyspark_aws_kinesis.fetch import arrow_columns, decode
from pyspark_aws_kinesis.fetch.arrow_columns import (
    JOIN_FROM_MEAN_BYTES,
    arrival_us,
    arrivals_column,
    binary_column,
    int64_array,
    scalar,
    string_array,
    value_bytes,
)
from pyspark_aws_kinesis.fetch.decode import binary_array
from tests.connector.support.fresh_process import fresh_modules


@pytest.fixture(params=["pyarrow", "buffers"])
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test of the columns' values runs both ways: an executor's (``pa.array`` where it is faster) and the
    driver's (``build_from_buffers``)."""
    monkeypatch.setattr(arrow_columns, "_from_buffers_only", request.param == "buffers")
    return request.param


@pytest.mark.parametrize("size", [0, 1, 100, 255, 256, 1024, 70_000])
def test_binary_columns_equal_pyarrows_own_from_a_list(size: int, way: str) -> None:
    """Both ways ``binary_array`` builds a column (the list as is, or one joined buffer and offsets for large
    items) give pyarrow's own array, with empty items among them."""
    items = [bytes([index % 256]) * (size + index % 3) for index in range(40)] + [b""]
    column = binary_array(items)
    assert column.type == pa.binary() and column.equals(pa.array(items, pa.binary()))
    assert binary_array([]).equals(pa.array([], pa.binary()))


class _WalkCountingList(list):
    """A list that counts how often it is walked from the start (each walk of 10,000 items' lengths is a cache
    miss per item: on a page of 1 KiB records, as costly as adding the lengths up)."""

    def __init__(self, items: list[bytes]) -> None:
        super().__init__(items)
        self.walks = 0

    def __iter__(self) -> Iterator[bytes]:
        self.walks += 1
        return super().__iter__()


def test_a_joined_binary_column_walks_its_items_twice(way: str) -> None:
    """Large items: the lengths are read in one walk (for the choice of the way, the offsets and the total bytes),
    the join is the other; small items: the lengths walk only (pyarrow reads the list by index), but from buffers."""
    small_walks = 2 if way == "buffers" else 1
    for items, walks in [([b"x" * 1000] * 20 + [b""], 2), ([b"x" * 10] * 20, small_walks)]:
        counting = _WalkCountingList(items)
        assert binary_array(counting).equals(pa.array(items, pa.binary()))
        assert counting.walks == walks


class _Huge(bytes):
    """Bytes that say they are ``size`` long: offsets past what int32 addresses, without allocating 2 GiB."""

    size = 2**30

    def __len__(self) -> int:
        return self.size


class _HugeItem(_Huge):
    size = 2**31  # one item past int32


@pytest.mark.parametrize("kind", [_Huge, _HugeItem])
def test_binary_columns_past_int32_offsets_take_pyarrows_way(kind: type[_Huge], way: str) -> None:
    """Offsets past int32 (two items of 1 GiB), or an item past it, are built by pyarrow over the list (which
    chunks what is that large), with the total bytes the items say they have."""
    items = [kind(b"ab"), kind(b"cd")]
    column, total = decode._binary_column(items)
    assert column.equals(pa.array(items, pa.binary())) and total == 2 * kind.size


def test_a_joined_binary_columns_lengths_reach_arrow_as_a_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lengths of large items go to Arrow as one ``array('i')`` buffer, not through ``pa.array`` over a list
    of ints (~0.5 % of a 1 KiB page to a batch); small items go through ``pa.array`` once, over the items."""
    calls: list[object] = []
    build = pa.array
    monkeypatch.setattr(pa, "array", lambda values, *args, **kwargs: calls.append(values) or build(values, *args))
    large = [b"x" * 1000] * 20 + [b""]
    column, total = decode._binary_column(large)
    assert calls == [] and total == 20_000
    monkeypatch.undo()
    assert column.equals(pa.array(large, pa.binary()))


@pytest.mark.parametrize("mean", [0, 1, JOIN_FROM_MEAN_BYTES - 1, JOIN_FROM_MEAN_BYTES, 4 * JOIN_FROM_MEAN_BYTES])
def test_the_total_bytes_come_with_the_column_either_way(mean: int, way: str) -> None:
    items = [b"x" * mean] * 10
    column, total = binary_column(items)
    assert column.equals(pa.array(items, pa.binary())) and total == 10 * mean


def test_value_bytes_are_read_off_the_offsets_of_a_slice_too() -> None:
    column = pa.array(["a", "ключ", "", "xyz"], pa.string())
    assert value_bytes(column) == 1 + len("ключ".encode()) + 0 + 3
    assert value_bytes(column.slice(1, 2)) == len("ключ".encode())
    assert value_bytes(pa.array([b"\x00\x01", b"z"], pa.binary())) == 3
    assert value_bytes(column.slice(2, 0)) == 0


@pytest.mark.parametrize(
    ("seconds", "micros"),
    [(None, None), (0.0, 0), (0.5, 500_000), (1_700_000_000.123, 1_700_000_000_123_000)],
)
def test_an_arrival_time_is_whole_milliseconds_in_microseconds(seconds: float | None, micros: int | None) -> None:
    assert arrival_us(seconds) == micros


def test_the_arrivals_column_is_arrival_us_of_each_stamp(way: str) -> None:
    stamps = [1_700_000_000.123, None, 1.0005, 1.0015, 2.5, 0.0004999]  # halves round as Python's round does
    column = arrivals_column(stamps)
    assert column.type == pa.int64() and column.to_pylist() == [arrival_us(stamp) for stamp in stamps]


@pytest.mark.parametrize("count", [0, 1, 8, 9, 17])
def test_int64_and_string_columns_are_pyarrows_own(count: int, way: str) -> None:
    ints = [None if index % 3 == 1 else 2**40 + index for index in range(count)]
    assert int64_array(ints).equals(pa.array(ints, pa.int64())) and int64_array(ints).null_count == ints.count(None)
    for strings in (
        [f"49590338271490256608559692538361571095921575989136588898-{i}" for i in range(count)],  # ASCII
        [f"clé-{i}" if i % 2 else "ключ" for i in range(count)],  # UTF-8 longer than the str
        ["a", None, ""],  # a None: pyarrow's way
    ):
        assert string_array(strings).equals(pa.array(strings, pa.string()))
    assert scalar("shardId-000000000001", pa.string()) == pa.scalar("shardId-000000000001", pa.string())
    assert scalar(7, pa.int64()) == pa.scalar(7, pa.int64())


def test_from_buffers_no_column_goes_through_pa_array(monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``build_from_buffers`` no column goes through ``pa.array`` or ``pa.scalar`` over Python objects (their
    first call imports pandas)."""
    monkeypatch.setattr(arrow_columns, "_from_buffers_only", True)
    calls: list[object] = []
    monkeypatch.setattr(pa, "array", lambda values, *args, **kwargs: calls.append(values))
    monkeypatch.setattr(pa, "scalar", lambda value, *args, **kwargs: calls.append(value))
    small = [b"x" * 10] * 20
    columns = [decode._binary_column(small)[0], string_array(["k", "ключ"]), int64_array([1, None])]
    columns += [arrivals_column([1.5, None]), decode.constant_column("s", pa.string(), 3)]
    assert calls == [] and len(columns) == 5
    monkeypatch.undo()
    assert columns[0].equals(pa.array(small, pa.binary()))


def test_the_drivers_probes_decode_without_importing_pandas() -> None:
    """A streaming query's driver side runs in a fresh process at each start: its probes' answers are decoded
    without pandas (~0.25 CPU s a start), the prober having chosen buffers."""
    code = """
import json, sys
from pyspark_aws_kinesis.fetch.decode import ShardContext, decode_get_records
from pyspark_aws_kinesis.retry import RetryPolicy
from pyspark_aws_kinesis.source.probe import ShardProber
ShardProber(lambda: None, RetryPolicy(), 1.0)
shard = ShardContext("s", "shardId-000000000000", 0, 2**128 - 1)
body = json.dumps({"NextShardIterator": "i", "MillisBehindLatest": 0, "Records": [
    {"Data": "YQ==", "PartitionKey": "k", "SequenceNumber": "1", "ApproximateArrivalTimestamp": 1.5},
    {"Data": "Yg==", "PartitionKey": "ключ", "SequenceNumber": "2", "ApproximateArrivalTimestamp": 1.6}]})
page = decode_get_records(body, shard)
keys = page.to_batch(shard, 0, len(page)).column("partitionKey").to_pylist()  # (a timestamp's would import it)
print(json.dumps({"meta": keys, "modules": sorted(sys.modules)}))
"""
    keys, modules = fresh_modules(code)
    assert keys == ["k", "ключ"] and "pyarrow" in modules and "pandas" not in modules
