"""Run by tests/package/test_wheel.py from a fresh venv that has the wheel installed: read a stream with
``format("aws-kinesis")`` and NO registration call, batch and streaming, then print one JSON line.

    python wheel_app.py classic|shell|connect <options JSON> <work dir>

classic (under spark-submit) and shell (exec'd in the ``pyspark`` shell's REPL): the classic SparkSession that
is there or that the builder starts. connect: ``builder.remote("local[2]")`` starts a local Spark Connect
server, so the lookup of ``pyspark_*`` modules runs on the server side.
"""

from __future__ import annotations

import json
import sys
import time

from pyspark.sql import SparkSession


def main() -> None:
    mode, options_json, work_dir = sys.argv[1:4]
    options = json.loads(options_json)
    started = time.monotonic()
    phases: dict[str, float] = {}

    def phase(name: str) -> None:  # seconds since start, for the test's report when something is slow
        phases[name] = round(time.monotonic() - started, 1)

    builder = SparkSession.builder.remote("local[2]") if mode == "connect" else SparkSession.builder.master("local[2]")
    spark = builder.config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate()
    phase("session")
    batch = spark.read.format("aws-kinesis").options(**options).load()
    batch_rows = sorted(bytes(row.data).decode() for row in batch.select("data").collect())
    phase("batch read")
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
    import pyspark

    import connector

    result = {
        "batch": batch_rows,
        "stream": stream_rows,
        "connector": connector.__file__,
        "pyspark": pyspark.__version__,
        "phases": phases,
        "shell_session": "spark" in globals(),  # exec'd in the pyspark shell: the shell made `spark` itself
    }
    print("RESULT " + json.dumps(result), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
