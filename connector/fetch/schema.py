"""The source's rows as Spark's DDL: what ``load()`` answers (``datasource``), importable without pyarrow;
``decode.ARROW_SCHEMA`` is the same schema in Arrow's form."""

from __future__ import annotations

SCHEMA_DDL = (
    "data BINARY, streamName STRING, partitionKey STRING, sequenceNumber STRING, subSequenceNumber BIGINT, "
    "shardId STRING, approximateArrivalTimestamp TIMESTAMP"
)
