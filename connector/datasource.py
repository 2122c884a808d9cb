"""The Spark data source ``aws-kinesis``: its name, its schema, and which reader or writer Spark gets.

Who calls it: Spark, which makes a ``KinesisDataSource(options)`` on the driver for every ``load()`` / ``save()`` /
``start()``. ``schema()`` runs at ``load()`` (reads only) and makes every option check that needs no AWS call, so a
bad option fails there rather than buried under pyspark's "Failed to plan Python data source"; ``streamReader()``
refuses ``kinesis.endingPosition``, which ``schema()`` cannot tell apart. Option errors leave with one frame of
traceback (``short_traceback``). Readers come from ``source``, writers from ``sink`` (imported when asked for).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

from .fetch.schema import SCHEMA_DDL
from .options import OptionError
from .source.settings import SourceSettings

E = TypeVar("E", bound=Exception)
NAME = "aws-kinesis"  # the format name Spark looks the source up by


class KinesisDataSource(DataSource):
    """``spark.readStream.format("aws-kinesis")`` / ``spark.read`` / ``df.write`` / ``df.writeStream``."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        """The fixed source schema (docs/source.md); validates the source options first (fails ``load()``)."""
        try:
            validate_source_options(self.options)
        except OptionError as error:
            raise short_traceback(error) from None
        return SCHEMA_DDL

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from .source.stream_reader import KinesisStreamReader

        try:
            return KinesisStreamReader(schema, self.options)
        except OptionError as error:
            raise short_traceback(error) from None

    def reader(self, schema: StructType) -> DataSourceReader:
        from .source.batch_reader import KinesisBatchReader

        return KinesisBatchReader(schema, self.options)

    def writer(self, schema: StructType, overwrite: bool):
        from .sink import KinesisBatchWriter, KinesisSinkInputError

        try:
            return KinesisBatchWriter(schema, self.options)
        except (OptionError, KinesisSinkInputError) as error:
            raise short_traceback(error) from None

    def streamWriter(self, schema: StructType, overwrite: bool):
        from .sink import KinesisSinkInputError, KinesisStreamWriter

        try:
            return KinesisStreamWriter(schema, self.options)
        except (OptionError, KinesisSinkInputError) as error:
            raise short_traceback(error) from None


def short_traceback(error: E) -> E:
    """``error`` (an option or column error) without the frames below the caller. Spark prints a Python error's
    traceback before its message (docs/source.md): with one frame left, the message is the 4th line the user
    reads, not the 12th."""
    return error.with_traceback(None)


def validate_source_options(options: Mapping[str, Any]) -> SourceSettings:
    """Every check of the source options that needs no AWS call: each option's value, the stream names, the
    credentials pair, the region, the retry intervals, the consumer type and ``kinesis.endingPosition``. Raises
    OptionError naming the option and what is allowed."""
    settings = SourceSettings.from_options(options)
    settings.ends()
    return settings
