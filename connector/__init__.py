"""A pure-Python Amazon Kinesis source and sink for PySpark (``format("aws-kinesis")``), imported as
``pyspark_aws_kinesis`` (the folder is ``connector/``: docs/design.md, "Folder and import name").

Installed, the package is found by pyspark's data-source lookup, which registers its ``DefaultSource`` (Spark
Connect clients included); code shipped with ``--py-files`` calls ``register(spark)`` once per SparkSession.
Options: docs/options.md; the source: docs/source.md; every error derives from ``KinesisConnectorError``
(docs/errors.md).
"""

from __future__ import annotations

from typing import Any

from .errors import KinesisConnectorError

__all__ = ["NAME", "DefaultSource", "KinesisConnectorError", "register"]


ALREADY_REGISTERED = "DATA_SOURCE_ALREADY_EXISTS"
# Plans hide options whose key matches this SQL conf or spark.redaction.regex: by default the keys, the token and
# the endpoints, not kinesis.stsExternalId (docs/security.md).
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
