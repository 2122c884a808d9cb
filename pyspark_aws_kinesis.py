"""The module pyspark finds by itself: ``format("aws-kinesis")`` with no registration call.

pyspark 4.0+ (``pyspark/sql/worker/lookup_data_sources.py``), at the first data-source lookup of a session,
imports every installed top-level module whose name starts with ``pyspark_`` and registers its
``DefaultSource`` under ``DefaultSource.name()``. It runs where Spark looks sources up, so it also serves Spark
Connect clients. Installed by the ``pyspark-aws-kinesis`` wheel; ``connector.register(spark)`` remains for code
shipped with ``--py-files``.
"""

from connector.datasource import KinesisDataSource as DefaultSource

__all__ = ["DefaultSource"]
