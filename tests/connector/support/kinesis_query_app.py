"""A streaming query run as its own process by the SIGKILL test: aws-kinesis -> parquet files, forever.

``python kinesis_query_app.py OPTIONS_JSON OUTPUT_DIR CHECKPOINT_DIR``; the test kills it with SIGKILL.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def main() -> None:
    options, output, checkpoint = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    sys.path.insert(0, str(ROOT))
    from pyspark.sql import SparkSession

    import pyspark_aws_kinesis

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kinesis-query-app")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    pyspark_aws_kinesis.register(spark)
    query = (
        spark.readStream.format("aws-kinesis")
        .options(**options)
        .load()
        .writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    query.awaitTermination()


if __name__ == "__main__":
    main()
