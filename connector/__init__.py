"""A pure-Python Amazon Kinesis source and sink for PySpark (``format("aws-kinesis")``).

Installed (``pip install pyspark-aws-kinesis``), pyspark finds the source by itself through the top-level module
``pyspark_aws_kinesis``: ``spark.readStream.format("aws-kinesis")`` or ``df.writeStream.format("aws-kinesis")``
with no call. Code shipped with ``--py-files`` instead calls ``connector.register(spark)`` once per SparkSession.
Options: docs/options.md; the source: docs/source.md.
"""

from __future__ import annotations

from typing import Any

NAME = "aws-kinesis"

__all__ = ["NAME", "register"]


def register(spark: Any) -> None:
    """Register the ``aws-kinesis`` data source with ``spark`` (a SparkSession; registering twice is harmless)."""
    # Imported here so that `import connector` (e.g. for connector.options) does not import pyspark.
    from pyspark.errors import AnalysisException

    from connector.source import KinesisDataSource

    try:
        spark.dataSource.register(KinesisDataSource)
    except AnalysisException as exc:
        # pyspark 4.0.2 refuses a second registration, e.g. when it found pyspark_aws_kinesis by itself.
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(exc):
            raise
