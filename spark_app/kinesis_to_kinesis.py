"""kinesis_to_kinesis: read events from one stream, enrich them, write them to another, record for record.

Each well-formed seed event becomes ``{"id", "country", "country_code", "event_time", "source_sequence_number",
"processed_at"}`` on ``--sink-stream``, under the partition key it had in the source (so events that shared a
shard keep their relative order). Malformed events go to ``--dead-letter-path``. Delivery is at least once: a
batch replayed after a failure is written again.

    python -m spark_app.kinesis_to_kinesis --source-stream raw --sink-stream enriched --region us-east-1 \\
        --checkpoint-location /tmp/k2k
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from itertools import chain
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from spark_app import common
from spark_app.events import COUNTRY, EVENT_TIME, ID, good, parse_events

JOB = "kinesis_to_kinesis"
# The seed template's countries; any other country passes through with a NULL code.
COUNTRY_CODES = {"Spain": "ES", "Portugal": "PT", "Finland": "FI", "France": "FR"}


def enrich(events: DataFrame) -> DataFrame:
    """The sink's rows (``data`` JSON, ``partitionKey``) for the good events of a ``parse_events`` result."""
    codes = F.create_map(*(F.lit(x) for x in chain.from_iterable(COUNTRY_CODES.items())))
    sequence = F.col("sequenceNumber") if "sequenceNumber" in events.columns else F.lit(None).cast("string")
    key = F.col("partitionKey") if "partitionKey" in events.columns else F.col(COUNTRY)
    return common.json_records(
        good(events),
        F.coalesce(key, F.col(COUNTRY)),
        [
            F.col(ID),
            F.col(COUNTRY),
            codes[F.col(COUNTRY)].alias("country_code"),
            F.date_format(EVENT_TIME, "yyyy-MM-dd'T'HH:mm:ss").alias("event_time"),
            sequence.alias("source_sequence_number"),
            common.batch_time("processed_at"),
        ],
    )


def parser() -> argparse.ArgumentParser:
    return common.job_parser(f"python -m spark_app.{JOB}", __doc__.split("\n\n")[0])


def start(spark: SparkSession, args: Any) -> list[StreamingQuery]:
    """Start the copying query and the dead-letter query; returns both."""
    common.register_connector(spark)
    enriched = enrich(parse_events(common.read_source(spark, args, "copy")))
    return [
        common.start_kinesis_query(enriched, args, JOB, "copy"),
        common.start_dead_letter_query(spark, args, JOB, parse_events),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    return common.run_job(JOB, parser(), start, argv)


if __name__ == "__main__":
    sys.exit(main())
