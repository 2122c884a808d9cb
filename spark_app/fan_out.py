"""fan_out: each micro-batch is parsed and persisted once, then written to Parquet files AND the sink stream.

A ``foreachBatch`` function caches the parsed batch so the source is read once, not once per destination,
writes the good events to ``--parquet-path/batch_id=<id>/`` (overwritten if Spark replays the batch, so files
hold each event once) and as JSON to ``--sink-stream`` (at least once: a replayed batch is sent again), routes
malformed events to ``--dead-letter-path``, and unpersists the batch whatever happened.

    python -m spark_app.fan_out --source-stream src --sink-stream copy --region us-east-1 \\
        --checkpoint-location /tmp/fo --parquet-path /tmp/fo-parquet
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from spark_app import common
from spark_app.events import COUNTRY, EVENT_TIME, ID, PAYLOAD, good, parse_events

JOB = "fan_out"
log = logging.getLogger("spark_app.fan_out")
# What the Parquet files keep of an event: its fields plus where it came from.
PARQUET_COLUMNS = (ID, COUNTRY, EVENT_TIME, *common.SOURCE_METADATA_COLUMNS)


@dataclass
class FanOut:
    """The ``foreachBatch`` function: one persisted batch, three destinations (Parquet, Kinesis, dead letters)."""

    parquet_path: str
    sink_options: dict[str, str]
    dead_letters: common.DeadLetterWriter
    events_written: int = 0

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        events = parse_events(batch).persist()
        try:
            events_ok = good(events)
            count = events_ok.count()
            if count:
                self._write_parquet(events_ok, batch_id)
                self._write_kinesis(events_ok)
            self.dead_letters(events, batch_id)
        finally:
            # A cached batch that is never released would pile up in executor memory batch after batch.
            events.unpersist()
        self.events_written += count
        log.info("fan_out: batch %d wrote %d event(s) to Parquet and Kinesis", batch_id, count)

    def _write_parquet(self, events: DataFrame, batch_id: int) -> None:
        columns = [name for name in PARQUET_COLUMNS if name in events.columns]
        events.select(*columns).write.mode("overwrite").parquet(
            common.child_path(self.parquet_path, f"batch_id={batch_id}")
        )

    def _write_kinesis(self, events: DataFrame) -> None:
        # The event as it arrived, keyed by country.
        records = events.select(F.col(PAYLOAD).alias("data"), F.col(COUNTRY).alias("partitionKey"))
        records.write.format(common.KINESIS_FORMAT).options(**self.sink_options).mode("append").save()


def parser() -> argparse.ArgumentParser:
    parser = common.job_parser(f"python -m spark_app.{JOB}", __doc__.split("\n\n")[0])
    parser.add_argument_group(JOB).add_argument(
        "--parquet-path", help="where the events go as Parquet (default: <checkpoint-location>-parquet)"
    )
    return parser


def start(spark: SparkSession, args: Any) -> list[StreamingQuery]:
    """Start the single fan-out query; returns it in a list like every job."""
    common.register_connector(spark)
    parquet_path = args.parquet_path or args.checkpoint_location.rstrip("/") + "-parquet"
    fan_out = FanOut(parquet_path, common.sink_options(args), common.DeadLetterWriter(args.dead_letter_path))
    query = (
        common.read_source(spark, args, "fan-out")
        .writeStream.queryName(JOB)
        .foreachBatch(fan_out)
        .option("checkpointLocation", common.checkpoint_of(args, "fan-out"))
        .trigger(**common.trigger_of(args))
        .start()
    )
    return [query]


def main(argv: Sequence[str] | None = None) -> int:
    return common.run_job(JOB, parser(), start, argv)


if __name__ == "__main__":
    sys.exit(main())
