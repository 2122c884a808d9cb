"""Run by tests/package/test_spark_connect_server.py as a thin Spark Connect client: a Python environment with
pyspark (the client) and no connector. It reads a stream in batch and streaming over ``sc://`` and copies the
stream into another through the sink, then prints one JSON line.

    python connect_client_app.py <sc:// URL> <source options JSON> <sink stream> <work dir>

``format("aws-kinesis")`` resolves on the server, in the server's Python workers, so the connector must be
installed there and not here; the credentials and endpoints in the options are used by the server too.
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession


def main() -> None:
    url, options_json, sink_stream, work_dir = sys.argv[1:5]
    options = json.loads(options_json)
    try:
        import pyspark_aws_kinesis  # noqa: F401

        client_has_connector = True
    except ModuleNotFoundError:
        client_has_connector = False
    spark = SparkSession.builder.remote(url).getOrCreate()
    batch = spark.read.format("aws-kinesis").options(**options).load()
    batch_rows = sorted(bytes(row.data).decode() for row in batch.select("data").collect())

    stream = spark.readStream.format("aws-kinesis").options(**options).load()
    to_memory = (
        stream.select("data")
        .writeStream.format("memory")
        .queryName("connect_rows")
        .option("checkpointLocation", f"{work_dir}/checkpoint-memory")
        .trigger(availableNow=True)
        .start()
    )
    to_memory.awaitTermination()
    stream_rows = sorted(bytes(row.data).decode() for row in spark.sql("SELECT data FROM connect_rows").collect())

    where_and_who = ("kinesis.endpointUrl", "kinesis.awsAccessKeyId", "kinesis.awsSecretKey")
    sink_options = {key: options[key] for key in where_and_who}
    to_sink = (
        stream.selectExpr("data", "partitionKey")
        .writeStream.format("aws-kinesis")
        .options(**sink_options)
        .option("kinesis.streamName", sink_stream)
        .option("kinesis.sink.aggregationEnabled", "false")  # plain records, so the test reads them with boto3
        .option("checkpointLocation", f"{work_dir}/checkpoint-sink")
        .trigger(availableNow=True)
        .start()
    )
    to_sink.awaitTermination()
    result = {
        "client_has_connector": client_has_connector,
        "batch": batch_rows,
        "stream": stream_rows,
    }
    print("RESULT " + json.dumps(result), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
