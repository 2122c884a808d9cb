"""The Arrow columns of a decoded page, built cheaply from its Python lists.

Who calls it: ``fetch.decode``, when it decodes an answer and when ``Page.to_batch`` builds a column the decode did
not keep; ``source.probe`` calls ``build_from_buffers`` once in the driver's process. Why each column is built the
way it is: docs/source.md, "Fast decoding".
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

# From this mean item size on, a binary column is cheaper built from one joined buffer and its offsets than by
# ``pa.array`` over the list.
JOIN_FROM_MEAN_BYTES = 256

_from_buffers_only = False  # set by build_from_buffers


def build_from_buffers() -> None:
    """From now on, this process builds every column from buffers, never by ``pa.array`` or ``pa.scalar`` over
    Python objects: their first call imports pandas (~0.25 CPU s). For the streaming source's runner, a fresh
    process at each query start that decodes only the probes' answers. The executors keep ``pa.array``, 6-26 %
    faster to a batch on strings and small items (docs/source.md, "Fast decoding")."""
    global _from_buffers_only
    _from_buffers_only = True


def int64_array(values: Sequence[int | None]) -> pa.Array:
    """An int64 column of ``values`` (None: null)."""
    if not _from_buffers_only:
        return pa.array(values, pa.int64())
    validity, nulls = _validity(values)
    data = array("q", [0 if value is None else value for value in values] if nulls else values)
    return pa.Array.from_buffers(pa.int64(), len(values), [validity, pa.py_buffer(data)], null_count=nulls)


def string_array(values: Sequence[str]) -> pa.Array:
    """A string column of ``values``: from buffers, their UTF-8 joined and the offsets (one encode in C when they
    are ASCII, as sequence numbers and most partition keys are)."""
    if not _from_buffers_only:
        return pa.array(values, pa.string())
    try:
        text = "".join(values)
        data = text.encode()
        if len(data) != len(text):  # not ASCII: each value's UTF-8 length
            encoded = [value.encode() for value in values]
            return _joined(pa.string(), encoded, _offsets(encoded)[0], b"".join(encoded))
        return _joined(pa.string(), values, _offsets(values)[0], data)
    except (TypeError, UnicodeEncodeError, OverflowError, pa.ArrowInvalid):  # a None, a lone surrogate: pyarrow's
        return pa.array(values, pa.string())


def binary_column(items: Sequence[bytes]) -> tuple[pa.Array, int]:
    """The binary column of ``items`` and their total bytes: from ``b"".join(items)`` and the offsets when the
    items are large (or ``build_from_buffers``), else ``pa.array``. The lengths are read once, for both the choice
    and the offsets, and reach Arrow as one ``array('i')`` buffer; offsets past what int32 addresses (``binary``,
    not ``large_binary``) take pyarrow's way over the list."""
    try:
        offsets, total = _offsets(items)
    except (OverflowError, pa.ArrowInvalid):
        return pa.array(items, pa.binary()), sum(map(len, items))
    if total < JOIN_FROM_MEAN_BYTES * len(items) and not _from_buffers_only:
        return pa.array(items, pa.binary()), total
    return _joined(pa.binary(), items, offsets, b"".join(items)), total


def scalar(value: str | int, type_: pa.DataType) -> pa.Scalar:
    """``pa.scalar(value, type_)`` of a string or an int64 (with ``build_from_buffers``: from a column of one)."""
    if not _from_buffers_only:
        return pa.scalar(value, type_)
    column = string_array([value]) if type_ == pa.string() else int64_array([value])  # type: ignore[list-item]
    return column[0]


def value_bytes(column: pa.Array) -> int:
    """The bytes of a string or binary column's values: its last offset less its first (no walk over them)."""
    if len(column) == 0:
        return 0
    offsets = memoryview(column.buffers()[1]).cast("i")
    return offsets[column.offset + len(column)] - offsets[column.offset]


def arrival_us(seconds: float | None) -> int | None:
    """Microseconds since the epoch of the wire format's arrival time (epoch seconds, millisecond precision)."""
    return None if seconds is None else round(seconds * 1000) * 1000


def arrivals_column(stamps: Sequence[float | None]) -> pa.Array:
    """``arrival_us`` of every ApproximateArrivalTimestamp of a page, as one int64 column computed by Arrow (its
    half-to-even rounding is Python's ``round``: the same values, None staying None)."""
    validity, nulls = _validity(stamps)
    data = array("d", [0.0 if stamp is None else stamp for stamp in stamps] if nulls else stamps)
    seconds = pa.Array.from_buffers(pa.float64(), len(stamps), [validity, pa.py_buffer(data)], null_count=nulls)
    millis = pc.cast(pc.round(pc.multiply(seconds, _THOUSAND)), pa.int64())
    return pc.multiply(millis, _THOUSAND_INT)


def _offsets(items: Sequence[Any]) -> tuple[pa.Buffer, int]:
    """The int32 offsets buffer of ``items`` (their lengths added up by Arrow) and their total length;
    OverflowError or ArrowInvalid past int32."""
    lengths = array("i", [0, *map(len, items)])
    sizes = pa.Array.from_buffers(pa.int32(), len(lengths), [None, pa.py_buffer(lengths)])
    offsets = pc.cumulative_sum_checked(sizes)
    return offsets.buffers()[1], memoryview(offsets.buffers()[1]).cast("i")[len(items)]


def _joined(type_: pa.DataType, items: Sequence[Any], offsets: pa.Buffer, data: bytes) -> pa.Array:
    return pa.Array.from_buffers(type_, len(items), [None, offsets, pa.py_buffer(data)])


def _validity(values: Sequence[Any]) -> tuple[pa.Buffer | None, int]:
    """Arrow's validity bitmap of ``values`` (a bit per value, set when not None) and the null count; no bitmap
    when none is None."""
    nulls = values.count(None)
    if not nulls:
        return None, 0
    bits = bytearray((len(values) + 7) // 8)
    for index, value in enumerate(values):
        if value is not None:
            bits[index >> 3] |= 1 << (index & 7)
    return pa.py_buffer(bits), nulls


# The factors of arrivals_column, as Arrow scalars made without pa.scalar (which imports pandas).
_THOUSAND = pa.Array.from_buffers(pa.float64(), 1, [None, pa.py_buffer(array("d", [1000.0]))])[0]
_THOUSAND_INT = pa.Array.from_buffers(pa.int64(), 1, [None, pa.py_buffer(array("q", [1000]))])[0]
