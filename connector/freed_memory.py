"""Hand the memory a task's read freed back to the operating system, once the task has taken every row.

Arrow's allocator (mimalloc on pyarrow 26, jemalloc on 15) and glibc's malloc keep freed pages for reuse, and Spark
reuses a Python worker for task after task: without this, a worker keeps the high-water mark of the largest batch
it ever read, such as a catch-up batch after a restart (docs/source.md, "Memory of a reused worker").
Who calls it, on executors: ``KinesisStreamReader.read`` and ``KinesisBatchReader.read`` at the end of a read, and
the sink's writers at the end of a task's write.
"""

from __future__ import annotations

import ctypes

import pyarrow as pa


def _malloc_trim():
    """glibc's ``malloc_trim`` from the symbols already loaded, or None where the C library has none (musl, macOS)."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


MALLOC_TRIM = _malloc_trim()


def release_freed_memory() -> None:
    """Arrow's pool first (its freed buffers), then malloc's free pages; ~0.02 ms when little was freed."""
    pa.default_memory_pool().release_unused()
    if MALLOC_TRIM is not None:
        MALLOC_TRIM(0)
