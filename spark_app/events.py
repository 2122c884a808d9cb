"""Pure DataFrame transformations for the generator's seed events ``{"id": 42, "data": "Spain", "date": "..."}``.

Used by the jobs that parse events (country_counts, kinesis_to_kinesis, fan_out) and by their unit tests on
static DataFrames. Nothing here reads or writes: every function takes a DataFrame and returns one, so the same
code runs on a stream and on a test table.

A record is *malformed* when its payload is not UTF-8, not a JSON object, or lacks a usable field: ``id`` must
be an integer, ``data`` (the country) a non-blank string, ``date`` a ``yyyy-MM-dd HH:mm:ss`` timestamp.
``parse_events`` never drops or fails on such a record: it sets ``error`` to a reason naming the field, so the
caller can route it to the dead-letter path (see ``spark_app.common.DeadLetterWriter``).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

# The generator's seed template writes `date` with date.now("YYYY-MM-DD hh:mm:ss").
DATE_FORMAT = "yyyy-MM-dd HH:mm:ss"
EVENT_SCHEMA = StructType(
    [
        StructField("id", LongType()),
        StructField("data", StringType()),
        StructField("date", StringType()),
    ]
)
# Columns parse_events adds; `payload` keeps the raw text so a dead letter can be replayed by hand.
PAYLOAD, ERROR = "payload", "error"
ID, COUNTRY, EVENT_TIME = "id", "country", "event_time"


def _utf8_or_null(data: Column) -> Column:
    # A plain cast silently replaces bad bytes with U+FFFD; a round trip tells us whether any were replaced.
    text = data.cast(StringType())
    return F.when(F.encode(text, "UTF-8") == data, text)


def decode_text(records: DataFrame, data_column: str = "data") -> DataFrame:
    """Add ``payload`` (the record as text) and ``error`` ("payload: not valid UTF-8", else NULL) to ``records``.

    Used directly by word_count, and by ``parse_events`` as its first step.
    """
    raw = F.col(data_column)
    is_binary = dict(records.dtypes)[data_column] == "binary"
    text = _utf8_or_null(raw) if is_binary else raw.cast(StringType())
    return records.withColumn(PAYLOAD, text).withColumn(
        ERROR, F.when(F.col(PAYLOAD).isNull(), F.lit("payload: not valid UTF-8"))
    )


def parse_events(records: DataFrame, data_column: str = "data") -> DataFrame:
    """Add ``payload``, ``id``, ``country``, ``event_time`` and ``error`` (NULL for a good event) to ``records``.

    ``records`` is the source's DataFrame (its binary or string ``data`` column holds one JSON event); every
    input row comes out exactly once, with all its original columns (the raw bytes stay for dead letters).
    """
    decoded = decode_text(records, data_column)
    text = F.col(PAYLOAD)
    parsed = F.from_json(text, EVENT_SCHEMA, {"mode": "PERMISSIVE"})
    event_time = F.try_to_timestamp(parsed["date"], F.lit(DATE_FORMAT))
    country = F.trim(parsed["data"])
    # The first failing check names the problem; order matters (a non-object has no fields at all).
    error = (
        F.when(F.col(ERROR).isNotNull(), F.col(ERROR))
        .when(_not_json_object(text), F.lit("payload: not a JSON object"))
        .when(parsed["id"].isNull(), F.lit("id: missing or not an integer"))
        .when(country.isNull() | (country == ""), F.lit("data: missing or blank country"))
        .when(event_time.isNull(), F.lit(f"date: missing or not '{DATE_FORMAT}'"))
    )
    return (
        decoded.withColumn(ID, parsed["id"])
        .withColumn(COUNTRY, country)
        .withColumn(EVENT_TIME, event_time)
        .withColumn(ERROR, error)
    )


def _not_json_object(text: Column) -> Column:
    # from_json gives a struct of NULLs for garbage, indistinguishable from `{}`; json_object_keys is NULL
    # exactly when the text is not a JSON object.
    return F.json_object_keys(text).isNull()


def good(events: DataFrame) -> DataFrame:
    """The well-formed events of a ``parse_events`` result."""
    return events.where(F.col(ERROR).isNull())


def malformed(events: DataFrame) -> DataFrame:
    """The malformed records of a ``parse_events`` result, each with its ``error`` reason and ``payload``."""
    return events.where(F.col(ERROR).isNotNull())
