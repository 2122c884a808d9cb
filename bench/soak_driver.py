"""The soak's Spark driver, in a process of its own so that ``bench.soak`` can SIGKILL it and start it again on
the same checkpoint, as a crashed EMR driver is restarted.

Run by ``bench.soak`` only: ``python -m bench.soak_driver <config.json>``. The config names the source and sink
options, the checkpoint, the file sink's directory (``sink: "file"``) and Spark settings (``spark.driver.memory``
is fixed there so that the JVM's heap has a known ceiling). It writes ``<work>/driver-<n>.json`` once the query
runs (the JVM's pid), appends every finished batch's id and row count to ``<work>/progress.jsonl``, and stops the
query and exits when ``<work>/stop`` appears. With ``kill_when_written`` in the config, once
``<work>/kill-when-written`` appears, it SIGKILLs its own process group as soon as a micro-batch's task has
finished (``KillWhenWritten``). Not a benchmark itself (run_all
skips it).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench import common


def start_query(spark: Any, config: dict[str, Any]) -> Any:
    frame = spark.readStream.format("aws-kinesis").options(**config["source"]).load()
    if config["sink"] == "file":
        writer = frame.selectExpr("CAST(data AS STRING) AS value").writeStream.format("text")
        writer = writer.option("path", config["file_sink"])
    else:
        writer = (
            frame.select("data", "partitionKey").writeStream.format("aws-kinesis").options(**config["sink_options"])
        )
    return writer.option("checkpointLocation", config["checkpoint"]).trigger(processingTime="1 second").start()


class KillWhenWritten(threading.Thread):
    """Once the harness creates ``<work>/kill-when-written``: SIGKILL this driver's process group (Python, JVM,
    Python workers) right after a task of a micro-batch has finished, i.e. written its partition, so that the kill
    falls between a batch's first written partition and its commit log entry, where a replay writes twice. Spark's
    status tracker is polled every ``POLL_S``; a stage gone from the active ones between two polls finished whole.
    The driver's first stage is left alone: after a kill it replays the batch the kill left, and killing that
    replay again would hold the query on one batch. What the kill met goes to ``<work>/kill-<incarnation>.json``."""

    POLL_S = 0.002

    def __init__(self, spark: Any, work: Path, incarnation: int) -> None:
        super().__init__(name="kill-when-written", daemon=True)
        self.tracker = spark.sparkContext.statusTracker()
        self.work, self.incarnation = work, incarnation

    def run(self) -> None:
        while not (self.work / "kill-when-written").exists():
            time.sleep(0.05)
        self.kill(*self.first_written())

    def first_written(self) -> tuple[int, int, int]:
        """(stage, its finished tasks, its tasks) once a stage has a finished task."""
        tasks: dict[int, int] = {}  # stage id -> its tasks, for the stages seen active
        while True:
            active = {stage for stage in self.tracker.getActiveStageIds() if stage > 0}
            for stage in active:
                info = self.tracker.getStageInfo(stage)
                if info is None:
                    continue
                tasks[stage] = info.numTasks
                if info.numCompletedTasks > 0:
                    return stage, info.numCompletedTasks, info.numTasks
            for stage in set(tasks) - active:
                return stage, tasks[stage], tasks[stage]
            time.sleep(self.POLL_S)

    def kill(self, stage: int, finished: int, tasks: int) -> None:
        met = {"stage": stage, "finished_tasks": finished, "tasks": tasks, "at": time.time()}
        (self.work / f"kill-{self.incarnation}.json").write_text(json.dumps(met))
        os.killpg(os.getpgrp(), signal.SIGKILL)


def main(config_path: str) -> int:
    config = json.loads(Path(config_path).read_text())
    work = Path(config["work"])
    os.environ.update(config.get("env", {}))
    spark = common.spark_session(**config["spark"])
    query = start_query(spark, config)
    status = {"jvm_pid": common.jvm_pid(spark), "python_pid": os.getpid(), "started": time.time()}
    (work / f"driver-{config['incarnation']}.json").write_text(json.dumps(status))
    if config.get("kill_when_written"):  # the watcher polls the work folder: only for a soak that aims its kills
        KillWhenWritten(spark, work, config["incarnation"]).start()
    latest = -1  # the last batch written out (a bounded record: this process is measured too)
    with (work / "progress.jsonl").open("a") as progress:
        while query.isActive and not (work / "stop").exists():
            for event in query.recentProgress:
                if event.batchId > latest:
                    latest = event.batchId
                    line = {"batchId": event.batchId, "rows": event.numInputRows, "at": time.time()}
                    progress.write(json.dumps(line) + "\n")
                    progress.flush()
            time.sleep(1)
    error = query.exception()
    query.stop()
    if error is not None:
        (work / f"driver-{config['incarnation']}.error").write_text(str(error))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
