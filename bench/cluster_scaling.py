"""Scaling with the cluster: the same stream read on ``local-cluster[1,1,1024]`` and ``local-cluster[2,1,1024]``.

Run: ``.venv/bin/python -m bench.cluster_scaling [--records 100000] [--size 1024] [--per-batch 25000]
[--no-quotas]`` (by default the server sits behind AWS's Kinesis quotas: ``bench.common``).

A 4-shard kinesalite stream is pre-loaded once. Each cluster runs in its own process (``--master``: a fresh
driver JVM, its executor JVMs and Python workers; the checkout reaches the executors through ``PYTHONPATH``, which
local-cluster executors inherit from the driver's environment), reads the whole stream with
``Trigger.AvailableNow`` and ``kinesis.maxRecordsPerTrigger=--per-batch`` into ``noop`` and reports the query's
wall time (Spark start-up excluded) and its steady state (the batches after the first). Printed: records/s of
each and the ratio of two executors to one; beside them, in the same run, what bounds both: the server's own
pace (``bench.common.raw_loop``: kinesalite answering one GetRecords at a time, unparsed) and the boto3 loop.
Nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from bench.common import (
    add_quota_flag,
    available_now,
    batch_sizes,
    boto3_loop,
    local_aws,
    options,
    preloaded_stream,
    print_quotas,
    raw_loop,
    read_seconds,
    spark_session,
    steady_state,
)
from localaws.servers import KINESALITE

SHARDS = 4
MASTERS = ("local-cluster[1,1,1024]", "local-cluster[2,1,1024]")
RESULT_MARK = "RESULT "


def run_on(master: str, opts: dict[str, str]) -> None:
    """``--master``: one AvailableNow query on ``master``; prints its result as one JSON line."""
    started = time.perf_counter()
    spark = spark_session(master)
    startup_s = time.perf_counter() - started
    _, wall_s, progress = available_now(spark, "aws-kinesis", opts)
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1  # minus the driver
    spark.stop()
    batches = batch_sizes(progress)
    report = {"startup_s": startup_s, "wall_s": wall_s, "batches": batches, "executors": executors}
    print(RESULT_MARK + json.dumps(report))


def measure(master: str, opts: dict[str, str]) -> dict:
    """Run ``--master`` in a fresh process; its report."""
    process = subprocess.run(
        [sys.executable, "-m", "bench.cluster_scaling", "--master", master, "--options", json.dumps(opts)],
        capture_output=True,
        text=True,
    )
    lines = [line for line in process.stdout.splitlines() if line.startswith(RESULT_MARK)]
    if process.returncode or not lines:
        raise RuntimeError(f"{master} failed ({process.returncode}):\n{process.stderr[-4000:]}")
    return json.loads(lines[-1][len(RESULT_MARK) :])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--per-batch", type=int, default=25_000)
    parser.add_argument("--master", help="internal: run one query on this master")
    parser.add_argument("--options", help="internal: the source options (JSON)")
    add_quota_flag(parser)
    args = parser.parse_args(argv)
    if args.master:
        run_on(args.master, json.loads(args.options))
        return
    with local_aws(args, KINESALITE) as aws, tempfile.TemporaryDirectory() as work:
        kinesis = aws.kinesalite.client("kinesis")
        setup = aws.kinesalite.direct.client("kinesis")
        stream = preloaded_stream(setup, "bench-cluster", SHARDS, args.records, args.size)
        results = {}
        for index, master in enumerate(MASTERS):
            opts = options(aws.kinesalite, stream, os.path.join(work, f"metadata-{index}"))
            # A task per shard, as when this bench was made: both executors get tasks (8 shards a task, the
            # default, would make the 4 shards one task, which one executor runs).
            per_shard = {"kinesis.maxrecordspertrigger": str(args.per_batch), "kinesis.shardsperpartition": "1"}
            results[master] = measure(master, opts | per_shard)
        # What bounds both, on the same server and records: kinesalite's own pace, and the boto3 loop.
        raw_s = read_seconds(raw_loop, aws.kinesalite, stream, args.records)
        boto3_s = read_seconds(boto3_loop, kinesis, stream, args.records)
    print(f"{args.records:,} records x {args.size} B in {SHARDS} kinesalite shards ({SHARDS} tasks a batch); ")
    print(f"AvailableNow, batches of up to {args.per_batch:,}, into noop; each cluster in a fresh process")
    print(f"| {'run':<44} | {'seconds':>8} | {'records/s':>10} | {'vs 1 executor':>13} |")
    print(f"|{'-' * 46}|{'-' * 10}|{'-' * 12}|{'-' * 15}|")
    base_whole, base_steady = None, None
    for master, result in results.items():
        rows, seconds = steady_state(result["batches"])
        whole, rate = args.records / result["wall_s"], rows / seconds
        base_whole, base_steady = base_whole or whole, base_steady or rate
        print(line(f"{master} ({result['executors']} executors), whole query", result["wall_s"], whole, base_whole))
        print(line("  steady state (after the first batch)", seconds, rate, base_steady))
        print(f"  start-up {result['startup_s']:.1f} s (not included); batches (rows, ms): {result['batches']}")
    print(line("kinesalite alone (raw_loop: no parsing)", raw_s, args.records / raw_s))
    print(line("boto3 GetRecords loop, 1 thread", boto3_s, args.records / boto3_s))
    print_quotas(aws)


def line(name: str, seconds: float, rate: float, base: float | None = None) -> str:
    ratio = f"{rate / base:13.2f}" if base else " " * 13
    return f"| {name:<44} | {seconds:8.2f} | {rate:>10,.0f} | {ratio} |"


if __name__ == "__main__":
    main()
