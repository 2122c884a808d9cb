"""A pure-Python Amazon Kinesis source and sink for PySpark (``format("aws-kinesis")``).

Imported as ``pyspark_aws_kinesis`` (the folder is ``connector/``; the checkout's ``pyspark_aws_kinesis`` is a link
to it, the wheel installs it under that name: docs/design.md). Installed (``pip install pyspark-aws-kinesis``),
pyspark finds the source by itself: its data-source lookup (``pyspark/sql/worker/lookup_data_sources.py``) imports
every top-level module named ``pyspark_*`` and registers its ``DefaultSource`` under ``DefaultSource.name()``, so
``spark.readStream.format("aws-kinesis")`` or ``df.writeStream.format("aws-kinesis")`` needs no call. It runs where
Spark looks sources up, so it also serves Spark Connect clients. Code shipped with ``--py-files`` instead calls
``pyspark_aws_kinesis.register(spark)`` once per SparkSession. Options: docs/options.md; the source: docs/source.md.
Every error it raises derives from ``KinesisConnectorError`` (``errors.py``); what to catch: docs/errors.md.
"""

from __future__ import annotations

from typing import Any

from .errors import KinesisConnectorError

__all__ = ["NAME", "DefaultSource", "KinesisConnectorError", "register"]


ALREADY_REGISTERED = "DATA_SOURCE_ALREADY_EXISTS"
# Spark shows a source's options in plans (explain(), the UI, logs) except those whose key matches this SQL conf
# (default "(?i)url") or spark.redaction.regex (default: secret, password, token, access key): the keys, the
# token and the endpoints are hidden already, kinesis.stsExternalId is not.
OPTIONS_REDACTION = "spark.sql.redaction.options.regex"
REDACTED = "externalid"


def register(spark: Any) -> None:
    """Register the ``aws-kinesis`` data source with ``spark`` (a SparkSession; registering twice is harmless).

    Where the package is installed, or ``pyspark_aws_kinesis`` is on the driver's path, pyspark has already
    registered the source by itself; pyspark 4.0 then refuses a second registration of the name
    (DATA_SOURCE_ALREADY_EXISTS) where newer versions replace it. Either way the source is there: jobs that call
    this keep working on a cluster that has the wheel installed (EMR's bootstrap action).
    """
    # Imported here so that `import pyspark_aws_kinesis` (e.g. for pyspark_aws_kinesis.options) does not import pyspark.
    from pyspark.errors import AnalysisException

    from .datasource import KinesisDataSource

    redact_external_id(spark)
    try:
        spark.dataSource.register(KinesisDataSource)
    except AnalysisException as exc:  # classic or Spark Connect (a subclass)
        if ALREADY_REGISTERED not in str(exc):
            raise


def redact_external_id(spark: Any) -> None:
    """Widen ``spark``'s option redaction (a runtime SQL conf) to ``kinesis.stsExternalId`` unless it covers it."""
    current = spark.conf.get(OPTIONS_REDACTION, "(?i)url")
    if REDACTED not in current.lower():
        spark.conf.set(OPTIONS_REDACTION, f"{current}|(?i){REDACTED}")


def __getattr__(name: str) -> Any:
    """``NAME`` (``"aws-kinesis"``) and ``DefaultSource`` (the data source class pyspark's lookup registers), from
    the module that owns them, on first use: it imports pyspark, which light imports (options, kpl) must not."""
    if name == "NAME":
        from .datasource import NAME

        return NAME
    if name == "DefaultSource":
        from .datasource import KinesisDataSource

        return KinesisDataSource
    raise AttributeError(f"module '{__name__}' has no attribute '{name}'")
