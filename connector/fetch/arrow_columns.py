"""The Arrow columns of a decoded page, built cheaply from its Python lists.

Who calls it: ``fetch.decode``, when it decodes an answer and when ``Page.to_batch`` builds a column the decode did
not keep. Why each column is built the way it is: docs/source.md, "Fast decoding".
"""

from __future__ import annotations

from array import array
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

# From this mean item size on, a binary column is cheaper built from one joined buffer and its offsets than by
# ``pa.array`` over the list.
JOIN_FROM_MEAN_BYTES = 256


def int64_array(values: list[Any]) -> pa.Array:
    return pa.array(values, pa.int64())


def string_array(values: list[Any]) -> pa.Array:
    return pa.array(values, pa.string())


def binary_column(items: list[bytes]) -> tuple[pa.Array, int]:
    """``pa.array(items, pa.binary())`` and the items' total bytes, from ``b"".join(items)`` and the offsets when
    the items are large. The lengths are read once, for both the choice and the offsets, and reach Arrow as one
    ``array('i')`` buffer; offsets past what int32 addresses (``binary``, not ``large_binary``) take pyarrow's way
    over the list."""
    try:
        lengths = array("i", [0, *map(len, items)])
        sizes = pa.Array.from_buffers(pa.int32(), len(lengths), [None, pa.py_buffer(lengths)])
        offsets = pc.cumulative_sum_checked(sizes)
    except (OverflowError, pa.ArrowInvalid):
        return pa.array(items, pa.binary()), sum(map(len, items))
    total = _last_int32(offsets)
    if total < JOIN_FROM_MEAN_BYTES * len(items):
        return pa.array(items, pa.binary()), total
    joined = pa.py_buffer(b"".join(items))
    return pa.Array.from_buffers(pa.binary(), len(items), [None, offsets.buffers()[1], joined]), total


def _last_int32(values: pa.Array) -> int:
    """The last value of a non-empty int32 column without nulls, read from its buffer (no Arrow scalar)."""
    return memoryview(values.buffers()[1]).cast("i")[values.offset + len(values) - 1]


def value_bytes(column: pa.Array) -> int:
    """The bytes of a string or binary column's values: its last offset less its first (no walk over them)."""
    if len(column) == 0:
        return 0
    offsets = memoryview(column.buffers()[1]).cast("i")
    return offsets[column.offset + len(column)] - offsets[column.offset]


def arrival_us(seconds: float | None) -> int | None:
    """Microseconds since the epoch of the wire format's arrival time (epoch seconds, millisecond precision)."""
    return None if seconds is None else round(seconds * 1000) * 1000


def arrivals_column(stamps: list[float | None]) -> pa.Array:
    """``arrival_us`` of every ApproximateArrivalTimestamp of a page, as one int64 column computed by Arrow (its
    half-to-even rounding is Python's ``round``: the same values, None staying None)."""
    seconds = pa.array(stamps, pa.float64())
    millis = pc.cast(pc.round(pc.multiply(seconds, 1000.0)), pa.int64())
    return pc.multiply(millis, 1000)
