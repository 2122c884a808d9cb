"""What differs between pyspark 4.0.2 (EMR 8.0) and newer pyspark, in one place.

- ``latestOffset(start, limit)`` (4.2+) vs ``latestOffset()`` (4.0): readers declare
  ``latestOffset(self, start=None, limit=None)``; 4.2+ counts two parameters and passes both, 4.0.2 passes none.
- ``SupportsTriggerAvailableNow`` and the ``ReadLimit`` classes exist from 4.2 on; stand-ins keep one code base.
"""

from __future__ import annotations

import pyspark

PYSPARK_VERSION = tuple(int(part) for part in pyspark.__version__.split(".")[:2])

try:
    from pyspark.sql.streaming.datasource import ReadAllAvailable, SupportsTriggerAvailableNow

    HAS_READ_LIMITS = True
except ImportError:  # pyspark < 4.2

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in: on pyspark < 4.2 AvailableNow runs everything up to one latestOffset in one batch."""

        def prepareForTriggerAvailableNow(self) -> None:
            pass

    class ReadAllAvailable:  # type: ignore[no-redef]
        """Stand-in for pyspark < 4.2, which has no read limits."""

    HAS_READ_LIMITS = False

__all__ = ["HAS_READ_LIMITS", "PYSPARK_VERSION", "ReadAllAvailable", "SupportsTriggerAvailableNow"]
