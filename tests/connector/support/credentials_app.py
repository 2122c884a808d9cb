"""The Spark side of the secret-leak test, as its own process so that every line Spark and Python print is
captured: a streaming query kinesis -> kinesis, a query that fails (its STS endpoint is down) and a batch write,
all through an assumed role. It prints each query's progress JSON and the failure's exception text.

``python credentials_app.py OPTIONS_JSON TARGET_STREAM WORK_DIR``
"""

from __future__ import annotations

import json
import logging
import os
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def main() -> None:
    options, target, work = json.loads(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    sys.path.insert(0, str(ROOT))
    logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
    for noisy in ("botocore", "urllib3", "py4j"):  # their DEBUG dumps request headers: not ours to police
        logging.getLogger(noisy).setLevel(logging.INFO)
    from pyspark.sql import SparkSession

    import pyspark_aws_kinesis

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("credentials-app")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.local.dir", str(work / "spark-local"))
        .config("spark.sql.warehouse.dir", str(work / "warehouse"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("INFO")
    pyspark_aws_kinesis.register(spark)
    sink = {**options, "kinesis.streamName": target}

    query = (
        spark.readStream.format("aws-kinesis")
        .options(**options)
        .load()
        .writeStream.format("aws-kinesis")
        .options(**sink)
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    for progress in query.recentProgress:
        print("PROGRESS", progress.json if hasattr(progress, "json") else json.dumps(progress), flush=True)

    down = {**options, "kinesis.stsEndpointUrl": "http://127.0.0.1:9"}  # nothing listens there
    failing = (
        spark.readStream.format("aws-kinesis")
        .options(**down)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(work / "checkpoint-failing"))
        .start()
    )
    try:
        failing.awaitTermination(120)
    except Exception as exc:
        print("FAILED", str(exc), traceback.format_exc(), sep="\n", flush=True)
    failing.stop()

    rows = spark.range(50).selectExpr(
        "cast(concat('batch-', id) as binary) as data", "cast(id as string) as partitionKey"
    )
    rows.write.format("aws-kinesis").options(**sink).mode("append").save()
    print("DONE", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
