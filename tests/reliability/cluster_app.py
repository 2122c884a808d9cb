"""A streaming query on a small real cluster, with one injected fault, run by ``test_cluster_faults`` through
``spark-submit --master local-cluster[2,1,1024] --py-files connector.zip cluster_app.py CONFIG_JSON``.

The connector comes only from the ``--py-files`` zip, as on EMR: nothing puts the checkout on the executors'
path. The query reads aws-kinesis, passes ``data`` through a Python UDF (where the fault is injected, inside a
running task that has already read records) and writes parquet files with a checkpoint. It runs until the test
kills it. CONFIG_JSON: ``options`` (source options), ``output``, ``checkpoint``, ``markers`` (a directory shared
by all processes on this machine: each injected fault leaves a file there) and ``fault``:

- ``kill_executor``: once, the task SIGKILLs its own executor JVM (found among its ancestors by the
  ``CoarseGrainedExecutorBackend`` command line and this application's id); Spark relaunches the executor and
  runs the task again elsewhere;
- ``fail_task_once``: in every batch, the first attempt of partition 0 raises once it holds records; Spark
  retries the task, which reads its range again.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

KILL_EXECUTOR = "kill_executor"
FAIL_TASK_ONCE = "fail_task_once"


def executor_jvm_pid(app_id: str) -> int:
    """The executor JVM this Python worker serves: the nearest ancestor running this app's executor backend."""
    pid = os.getpid()
    while pid > 1:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        if "CoarseGrainedExecutorBackend" in command and app_id in command:
            return pid
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    raise RuntimeError(f"no executor JVM of {app_id} among the ancestors of {os.getpid()}")


def _first(marker: Path) -> bool:
    """True for exactly one caller across all processes: whoever creates ``marker``."""
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def fault_injector(fault: str, markers: str, app_id: str) -> Callable[[bytes], bytes]:
    """The body of a Python UDF on ``data`` that returns it unchanged, injecting ``fault`` on the first call."""

    def inject(data: bytes) -> bytes:
        from pyspark import TaskContext

        context = TaskContext.get()
        if fault == KILL_EXECUTOR and _first(Path(markers, "killed")):
            os.kill(executor_jvm_pid(app_id), signal.SIGKILL)
            time.sleep(60)  # this worker dies with its executor
        if fault == FAIL_TASK_ONCE and context.partitionId() == 0 and context.attemptNumber() == 0:
            Path(markers, f"failed-stage{context.stageId()}").touch()
            raise RuntimeError("injected failure of a task's first attempt")
        return data

    return inject


def main() -> None:
    config = json.loads(sys.argv[1])
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import udf

    spark = SparkSession.builder.appName("reliability-cluster").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    import pyspark_aws_kinesis  # from the --py-files zip

    pyspark_aws_kinesis.register(spark)
    frame = spark.readStream.format("aws-kinesis").options(**config["options"]).load()
    inject = udf(fault_injector(config["fault"], config["markers"], spark.sparkContext.applicationId), "binary")
    query = (
        frame.withColumn("data", inject("data"))
        .writeStream.format("parquet")
        .option("path", config["output"])
        .option("checkpointLocation", config["checkpoint"])
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    query.awaitTermination()


if __name__ == "__main__":
    main()
