"""A pure-Python Amazon Kinesis source and sink for PySpark (``format("aws-kinesis")``).

``connector.register(spark)`` once per SparkSession, then ``spark.readStream.format("aws-kinesis")`` or
``df.writeStream.format("aws-kinesis")``. Options: docs/options.md; the source: docs/source.md.
"""

from __future__ import annotations

from typing import Any

NAME = "aws-kinesis"

__all__ = ["NAME", "register"]


def register(spark: Any) -> None:
    """Register the ``aws-kinesis`` data source with ``spark`` (a SparkSession; registering twice is harmless)."""
    # Imported here so that `import connector` (e.g. for connector.options) does not import pyspark.
    from connector.source import KinesisDataSource

    spark.dataSource.register(KinesisDataSource)
