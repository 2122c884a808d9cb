"""word_count: a running count of the words in the source stream's records, on the console or to Kinesis.

Each record is read as UTF-8 text and split into lower-cased words (letters, digits and apostrophes); records
that are not valid UTF-8 go to ``--dead-letter-path``. With ``--output kinesis`` every changed count is written
to ``--sink-stream`` as ``{"word", "count", "emitted_at"}`` keyed by the word; the record with the latest
``emitted_at`` per word holds its count. The counts are kept for every word ever seen (no watermark): meant as a
first sample, not for unbounded vocabularies.

    python -m spark_app.word_count --source-stream src --region us-east-1 --checkpoint-location /tmp/wc
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from spark_app import common
from spark_app.events import ERROR, PAYLOAD, decode_text

JOB = "word_count"
# Anything that is not a letter, a digit or an apostrophe separates words ("don't" stays one word).
WORD_SEPARATOR = r"[^\p{L}\p{N}']+"


def words(records: DataFrame) -> DataFrame:
    """One row (``word``) per word of every well-formed record of ``records`` (the source's rows)."""
    text = decode_text(records).where(F.col(ERROR).isNull())
    return text.select(F.explode(F.split(F.lower(F.col(PAYLOAD)), WORD_SEPARATOR)).alias("word")).where(
        F.col("word") != ""
    )


def count_words(records: DataFrame) -> DataFrame:
    return words(records).groupBy("word").count()


def parser() -> argparse.ArgumentParser:
    parser = common.job_parser(f"python -m spark_app.{JOB}", __doc__.split("\n\n")[0])
    parser.add_argument_group(JOB).add_argument(
        "--output", choices=("console", "kinesis"), default="console", help="where the counts go (default: %(default)s)"
    )
    return parser


def start(spark: SparkSession, args: Any) -> list[StreamingQuery]:
    """Start the counting query (console or Kinesis) and the dead-letter query; returns both."""
    common.register_connector(spark)
    counts = count_words(common.read_source(spark, args, "counts"))
    if args.output == "kinesis":
        records = common.json_records(
            counts,
            F.col("word"),
            ["word", "count", common.batch_time("emitted_at")],
        )
        main_query = common.start_kinesis_query(records, args, JOB, "counts", output_mode="update")
    else:
        main_query = (
            counts.orderBy(F.desc("count"), "word")
            .writeStream.format("console")
            .outputMode("complete")
            .option("truncate", "false")
            .queryName(f"{JOB}-console")
            .option("checkpointLocation", common.checkpoint_of(args, "counts"))
            .trigger(**common.trigger_of(args))
            .start()
        )
    return [main_query, common.start_dead_letter_query(spark, args, JOB, decode_text)]


def main(argv: Sequence[str] | None = None) -> int:
    return common.run_job(JOB, parser(), start, argv, needs_sink=lambda args: args.output == "kinesis")


if __name__ == "__main__":
    sys.exit(main())
