"""country_counts: events per country per event-time window, written as JSON to the sink stream.

Reads the generator's seed events (``{"id", "data": country, "date"}``) from ``--source-stream``, counts the
well-formed ones per ``--window-seconds`` window of their ``date`` and per country, with a watermark of
``--watermark-seconds``, and writes each count to ``--sink-stream`` as
``{"window_start", "window_end", "country", "count", "emitted_at"}`` with the country as partition key.
Malformed events go to ``--dead-letter-path`` (see ``spark_app.events`` for what counts as malformed).

Output modes: ``update`` (default) re-emits a window's count each batch in which it changed, so for every
(window_start, country) the record with the latest ``emitted_at`` holds the count; ``append`` emits each
window once, after the watermark has passed its end.

    python -m spark_app.country_counts --source-stream src --sink-stream counts --region us-east-1 \\
        --checkpoint-location /tmp/cc --trigger-seconds 5
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from pyspark_aws_kinesis.cli import number
from spark_app import common
from spark_app.events import COUNTRY, EVENT_TIME, good, parse_events

JOB = "country_counts"
# Same layout as the events' `date`, so a window reads like the events it counts.
TIME_FORMAT = "yyyy-MM-dd HH:mm:ss"


def count_per_country(events: DataFrame, window_seconds: int, watermark_seconds: int) -> DataFrame:
    """``window`` (start, end), ``country``, ``count`` of the good events of a ``parse_events`` result."""
    return (
        good(events)
        .withWatermark(EVENT_TIME, f"{watermark_seconds} seconds")
        .groupBy(F.window(EVENT_TIME, f"{window_seconds} seconds"), F.col(COUNTRY))
        .count()
    )


def to_sink_records(counts: DataFrame) -> DataFrame:
    """One JSON record per (window, country) count, keyed by country so one country's updates stay in order."""
    return common.json_records(
        counts,
        F.col(COUNTRY),
        [
            F.date_format("window.start", TIME_FORMAT).alias("window_start"),
            F.date_format("window.end", TIME_FORMAT).alias("window_end"),
            F.col(COUNTRY),
            F.col("count"),
            common.batch_time("emitted_at"),
        ],
    )


def parser() -> argparse.ArgumentParser:
    parser = common.job_parser(f"python -m spark_app.{JOB}", __doc__.split("\n\n")[0])
    job = parser.add_argument_group(JOB)
    seconds = number(0, whole=True, unit="seconds")
    job.add_argument(
        "--window-seconds", type=seconds, default=60, help="event-time window length (default: %(default)s)"
    )
    job.add_argument(
        "--watermark-seconds",
        type=seconds,
        default=60,
        help="how late (event time) an event may arrive (default: %(default)s)",
    )
    job.add_argument(
        "--output-mode",
        choices=("update", "append"),
        default="update",
        help="update: re-emit changed counts; append: emit final counts (default: %(default)s)",
    )
    return parser


def start(spark: SparkSession, args: Any) -> list[StreamingQuery]:
    """Start the counting query and its dead-letter query; returns both."""
    common.register_connector(spark)
    events = parse_events(common.read_source(spark, args, "counts"))
    counts = to_sink_records(count_per_country(events, args.window_seconds, args.watermark_seconds))
    return [
        common.start_kinesis_query(counts, args, JOB, "counts", args.output_mode),
        common.start_dead_letter_query(spark, args, JOB, parse_events),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    return common.run_job(JOB, parser(), start, argv)


if __name__ == "__main__":
    sys.exit(main())
