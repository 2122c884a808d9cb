"""What differs between pyspark 4.0.2 (EMR 8.0) and newer pyspark, in one place.

- ``latestOffset(start, limit)`` (4.2+) vs ``latestOffset()`` (4.0): readers declare
  ``latestOffset(self, start=None, limit=None)``; 4.2+ counts two parameters and passes both, 4.0.2 passes none.
- ``SupportsTriggerAvailableNow`` and the ``ReadLimit`` classes exist from 4.2 on; stand-ins keep one code base.
- ``DataSourceStreamArrowWriter`` exists from 4.1 on; on 4.0.2 a stream writer that also derives from
  ``DataSourceArrowWriter`` is handed RecordBatches by the same worker code (``STREAM_ARROW_WRITER_BASES``).
"""

from __future__ import annotations

import pyspark

PYSPARK_VERSION = tuple(int(part) for part in pyspark.__version__.split(".")[:2])

try:
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

    HAS_READ_LIMITS = True
except ImportError:  # pyspark < 4.2
    from dataclasses import dataclass

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in: on pyspark < 4.2 AvailableNow runs everything up to one latestOffset in one batch."""

        def prepareForTriggerAvailableNow(self) -> None:
            pass

    class ReadAllAvailable:  # type: ignore[no-redef]
        """Stand-in for pyspark < 4.2, which has no read limits."""

    @dataclass
    class ReadMaxRows:  # type: ignore[no-redef]
        """Stand-in for pyspark < 4.2, which has no read limits."""

        max_rows: int

    HAS_READ_LIMITS = False

# --- sink: base classes of an Arrow stream writer -----------------------------------------------------------------
try:
    from pyspark.sql.datasource import DataSourceStreamArrowWriter

    STREAM_ARROW_WRITER_BASES: tuple[type, ...] = (DataSourceStreamArrowWriter,)
except ImportError:  # pyspark 4.0.x
    from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamWriter

    STREAM_ARROW_WRITER_BASES = (DataSourceStreamWriter, DataSourceArrowWriter)
# ----------------------------------------------------------------------------------------------- end of sink block

__all__ = [
    "HAS_READ_LIMITS",
    "PYSPARK_VERSION",
    "STREAM_ARROW_WRITER_BASES",
    "ReadAllAvailable",
    "ReadMaxRows",
    "SupportsTriggerAvailableNow",
]
