"""Run by tests/package/test_wheel.py from a fresh venv that has the wheel installed: read a stream with
``format("aws-kinesis")`` and NO registration call, batch and streaming, then print one JSON line.

    python wheel_app.py classic|shell|connect <options JSON> <work dir> [<CloudWatch endpoint> <namespace>]

classic (under spark-submit) and shell (exec'd in the ``pyspark`` shell's REPL): the classic SparkSession that
is there or that the builder starts. connect: ``builder.remote("local[2]")`` starts a local Spark Connect
server, so the lookup of ``pyspark_*`` modules runs on the server side. With a CloudWatch endpoint (moto), the
streaming read is watched by ``pyspark_aws_kinesis.metrics.publish_to_cloudwatch`` (over Connect its listener runs in
this client process) and the app waits until the published ``InputRows`` add up to what the query read.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime, timedelta

from pyspark.sql import SparkSession


def main() -> None:
    mode, options_json, work_dir = sys.argv[1:4]
    cloudwatch = sys.argv[4:6]  # [endpoint, namespace] or []
    options = json.loads(options_json)
    started = time.monotonic()
    phases: dict[str, float] = {}

    def phase(name: str) -> None:  # seconds since start, for the test's report when something is slow
        phases[name] = round(time.monotonic() - started, 1)

    if mode == "connect":  # its server on 127.0.0.1 only (pyspark's default is every interface)
        builder = SparkSession.builder.remote("local[2]").config("spark.connect.grpc.binding.address", "127.0.0.1")
    else:
        builder = SparkSession.builder.master("local[2]")
    spark = builder.config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate()
    phase("session")
    batch = spark.read.format("aws-kinesis").options(**options).load()
    batch_rows = sorted(bytes(row.data).decode() for row in batch.select("data").collect())
    phase("batch read")
    if cloudwatch:
        from pyspark_aws_kinesis.metrics import publish_to_cloudwatch

        endpoint, namespace = cloudwatch
        keys = {"access_key_id": "testing", "secret_key": "testing", "region": "us-east-1"}
        publish_to_cloudwatch(spark, namespace, {"Job": "wheel"}, endpoint_url=endpoint, **keys)
    query = (
        spark.readStream.format("aws-kinesis")
        .options(**options)
        .load()
        .select("data")
        .writeStream.format("memory")
        .queryName("wheel_rows")
        .option("checkpointLocation", f"{work_dir}/checkpoint-{mode}")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    phase("stream read")
    stream_rows = sorted(bytes(row.data).decode() for row in spark.sql("SELECT data FROM wheel_rows").collect())
    published = published_input_rows(*cloudwatch, len(stream_rows)) if cloudwatch else None
    import pyspark

    import pyspark_aws_kinesis

    result = {
        "batch": batch_rows,
        "stream": stream_rows,
        "connector": pyspark_aws_kinesis.__file__,
        "pyspark": pyspark.__version__,
        "phases": phases,
        "published_input_rows": published,
        "shell_session": "spark" in globals(),  # exec'd in the pyspark shell: the shell made `spark` itself
    }
    print("RESULT " + json.dumps(result), flush=True)
    spark.stop()


def published_input_rows(endpoint: str, namespace: str, expected: int, timeout_s: float = 60.0) -> float:
    """The sum of every ``InputRows`` datum published under ``namespace``, once it reaches ``expected`` or the
    time is up (listener events reach the client shortly after the query ends)."""
    import boto3

    cloudwatch = boto3.client(
        "cloudwatch", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )  # fmt: skip
    deadline = time.monotonic() + timeout_s
    while True:
        total = 0.0
        now = datetime.now(UTC)
        for metric in cloudwatch.list_metrics(Namespace=namespace, MetricName="InputRows")["Metrics"]:
            points = cloudwatch.get_metric_statistics(
                Namespace=namespace,
                MetricName="InputRows",
                Dimensions=metric["Dimensions"],
                StartTime=now - timedelta(minutes=30),
                EndTime=now + timedelta(minutes=5),
                Period=60,
                Statistics=["Sum"],
            )["Datapoints"]
            total += sum(point["Sum"] for point in points)
        if total >= expected or time.monotonic() > deadline:
            return total
        time.sleep(1)


if __name__ == "__main__":
    main()
