"""The Spark data source ``aws-kinesis``: its name, its schema, and which reader or writer Spark gets.

Spark makes a ``KinesisDataSource(options)`` on the driver for every ``load()`` / ``save()`` / ``start()``.
``schema()`` runs at ``load()`` (``spark.read`` and ``spark.readStream``; a write never calls it): every source
option check that needs no AWS call runs there, so a bad option fails at ``load()`` instead of at query start,
where pyspark buries it under "Failed to plan Python data source" and a misleading ``UnboundLocalError``.
The one check ``schema()`` cannot make, ``kinesis.endingPosition`` on a streaming read (``schema()`` is the same
for ``spark.read`` and ``spark.readStream``), is made by ``streamReader()`` at query start. Option errors leave
with one frame of traceback (``short_traceback``), so that their line comes right under Spark's header.
Readers come from ``stream_reader`` / ``batch_reader``; writers from ``pyspark_aws_kinesis.sink`` (imported lazily,
so a reader never imports the sink).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

from .fetch.decode import SCHEMA_DDL
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
