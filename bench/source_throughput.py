"""Source throughput in Spark: AvailableNow into ``noop`` against a raw boto3 GetRecords loop, same records, and
where the first batch's time goes.

Run: ``.venv/bin/python -m bench.source_throughput [--records 200000] [--size 1024] [--per-batch 50000]
[--shards 4] [--shards-per-partition N] [--hashed-keys] [--warm-up 4] [--no-quotas]`` (ours, the baseline and the
ceiling read through AWS's Kinesis quotas by default, 2 MiB/s and 5 calls/s per shard: ``bench.common``; the stream
is pre-loaded directly).

A ``--shards``-shard kinesalite stream is pre-loaded with ``--records`` records of ``--size`` bytes, the same number
in every shard (``bench.common.stream_keys``; ``--hashed-keys``: spread by 1,000 keys' hash, as before 2026-11-27:
the fullest of 4 shards then held 3.6 % more than the mean, and its last records were read alone, at one shard's
quota, so the quota line was out of reach of any reader keeping the quotas). In the same run:
- baseline: a boto3 loop reading every shard from TRIM_HORIZON to the tip (GetRecords Limit 10,000), one
  thread, keeping each record's data (botocore parses every answer); run before, between and after our two
  queries (the host's speed drifts: the mean of the three is the baseline, each is printed);
- ours: ``spark.readStream.format("aws-kinesis")`` with ``Trigger.AvailableNow`` and
  ``kinesis.maxRecordsPerTrigger=--per-batch`` into the ``noop`` sink on local[2], through
  ``bench.first_batch.TimedKinesisSource`` (the same source, logging when its calls run). Spark's start-up
  (``getOrCreate``) is reported on its own; the query's wall time includes its first batch (Python workers
  start); the steady state is the rows/s of the batches after the first (from the query progress);
- ours again, warm: the same query (new checkpoint and metadata) right after, in the same session: Spark's
  Python daemon and workers are up, as for every query after an application's first;
- ours hot: the warm query again after ``--warm-up`` more (4), for its CPU once the JVM's compiler has compiled
  what the queries run (as in a query that has run for minutes); each one's CPU per GiB is printed;
- ours warm with ``kinesis.shardsPerPartition=1`` (a task per shard, the layout before shards were read side by
  side): with more shards than cores, Spark runs the tasks in waves, each read paced at the shard's quota;
- the ceiling: ``bench.common.raw_loop``, the same loop without botocore's parsing: kinesalite (one Node.js
  thread) answering one GetRecords at a time, before and after ours, always directly (behind the quota proxy a
  one-thread loop reads one shard at a time at that shard's quota, not at the server's pace); a reader of this
  server gains at most this over the baseline;
- Spark's floor: a streaming Python source whose ``--shards`` partitions read nothing (``bench.timing_log.
  EmptySource``), one AvailableNow batch in a fresh Spark (a subprocess: ``--floor``), so that its JVM is as cold
  as ours;
- the quota: shards x 2 MiB/s (AWS's read quota per shard, which our reader keeps even with ``--no-quotas``), in
  records/s of this stream's records (data and partition key, as Kinesis counts them). A reader that keeps the
  quotas can reach at most min(ceiling, quota): our ratio to it is printed.
Printed: seconds, records/s and the ratio to the baseline (goals: whole query >= 1.0, steady state >= 1.5; and
the steady state >= 95 % of min(ceiling, quota)), the CPU seconds per GiB read of the client side
(``common.client_cpu_s``: this process and every process below it, the JVM and Python workers included, the
servers and the quota proxy in front of them not: it runs in this process but stands in for AWS, and its own CPU per
GiB is printed beside) for the boto3 loop and for each query; for the warm and the hot query by kind of process
(``common.client_cpu_by_kind``) and, between their first and last batches, by part, the Spark JVM by what its
threads do (``bench.query_cpu``); then the first batch's breakdown; the plot goes to
``bench/results/source_throughput.png``. Nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.common import (
    add_quota_flag,
    available_now,
    batch_sizes,
    boto3_loop,
    client_cpu_by_kind,
    client_cpu_s,
    jvm_pid,
    local_aws,
    options,
    preload,
    print_quotas,
    raw_loop,
    read_seconds,
    spark_session,
    steady_state,
)
from bench.query_cpu import JIT, CpuAtBatchEnds
from localaws.fault_proxy import serving_cpu_s
from localaws.servers import KINESALITE
from localaws.streams import create_stream, unique_name
from pyspark_aws_kinesis.record_sizes import SHARD_READ_BYTES_PER_S

SHARDS = 4
PLOT = Path(__file__).parent / "results" / "source_throughput.png"
FLOOR_MARK = "FLOOR "
# The queries run between the warm one and the hot one. In 2026-12-02's runs the JVM's compiler took 12-21 CPU s per
# GiB of a query's steady batches in the 2nd and 3rd query of a session, 2-9 from the 4th or 5th on, with flares
# (docs/benchmarks.md).
WARM_UP_QUERIES = 4


def timed_session(log_path: str):
    """local[2] with the timed sources registered; their processes log to ``log_path``."""
    from bench import first_batch, timing_log

    os.environ[timing_log.LOG_ENV] = log_path  # inherited by the JVM, hence by every Python worker
    spark = spark_session()
    spark.dataSource.register(first_batch.TimedKinesisSource)
    spark.dataSource.register(timing_log.EmptySource)
    return spark


def epoch(progress: dict) -> float:
    """When a progress report's trigger started (epoch seconds)."""
    return datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()


def first_batch_parts(started_at: float, progress: list[dict], log_path: str) -> dict[str, float]:
    """The first batch's time, from ``start()`` to its end: driver-side parts (query progress + the source's own
    calls) and the executor side of its slowest first read (``first_batch.worker_breakdown``)."""
    from bench.first_batch import driver_breakdown, worker_breakdown
    from bench.timing_log import read_log

    lines = read_log(log_path)
    first = progress[0]
    durations = first["durationMs"]
    planned = [line for line in lines if line["event"] == "partitions"]
    planning_end = planned[0]["ended"] if planned else epoch(first)
    initial = [line for line in lines if line["event"] == "initialOffset"]
    parts = {
        "start() -> first trigger (query thread, source runner)": epoch(first) - started_at,
        **driver_breakdown(lines, started_at),
        "driver: source initialOffset (ours)": sum(line["ended"] - line["started"] for line in initial),
        "driver: latestOffset (Spark's view)": durations.get("latestOffset", 0) / 1000,
        "driver: queryPlanning + getBatch + partitions": (
            durations.get("queryPlanning", 0) + durations.get("getBatch", 0)
        )
        / 1000,
        "driver: addBatch (the Spark job: tasks below)": durations.get("addBatch", 0) / 1000,
        "driver: walCommit + commitOffsets": (durations.get("walCommit", 0) + durations.get("commitOffsets", 0)) / 1000,
        "first batch triggerExecution": durations["triggerExecution"] / 1000,
    }
    return parts | worker_breakdown(lines, planning_end)


def floor_main(partitions: int) -> None:
    """``--floor``: Spark's own first batch of a Python streaming source that reads nothing (fresh JVM)."""
    with tempfile.TemporaryDirectory() as work:
        log_path = os.path.join(work, "timing.jsonl")
        spark = timed_session(log_path)
        started_at, wall, progress = available_now(spark, "bench-empty", {"partitions": str(partitions)})
        spark.stop()
        from bench.timing_log import read_log

        reads = [line for line in read_log(log_path) if line["event"] == "read"]
    first = progress[0]
    report = {
        "wall": wall,
        "to_first_trigger": epoch(first) - started_at,
        "trigger": first["durationMs"]["triggerExecution"] / 1000,
        "addBatch": first["durationMs"].get("addBatch", 0) / 1000,
        "worker_start": max((line["module_loaded"] - line["process_started"] for line in reads), default=0.0),
    }
    print(FLOOR_MARK + json.dumps(report))


def spark_floor(shards: int) -> dict[str, float]:
    """Run ``--floor`` in a fresh process; its report."""
    command = [sys.executable, "-m", "bench.source_throughput", "--floor", "--shards", str(shards)]
    process = subprocess.run(command, capture_output=True, text=True, check=True)
    line = next(line for line in process.stdout.splitlines() if line.startswith(FLOOR_MARK))
    return json.loads(line[len(FLOOR_MARK) :])


def plot(
    rates: dict[str, float],
    parts: dict[str, float],
    floor: dict[str, float],
    cpu: list[tuple[float, float]],
    loop_cpu_per_gib: float,
    path: Path,
) -> bool:
    """Records/s of each run, the first batch's parts beside Spark's floor, and the CPU per GiB of the queries from
    the warm one to the hot one (``steady_cpu_per_gib``) against the loop's; False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figure, (speed, first, spent) = plt.subplots(3, 1, figsize=(9, 10), gridspec_kw={"height_ratios": [1, 2, 1]})
    colors = ["grey", "tab:blue", "tab:blue", "tab:blue", "tab:blue", "lightgrey", "tab:red", "grey"]
    speed.barh(list(rates), list(rates.values()), color=colors)
    speed.invert_yaxis()
    speed.set_xlabel("records/s (same run)")
    bars = {name: seconds for name, seconds in parts.items() if name != "first batch triggerExecution"}
    bars["floor: empty source, start() -> first trigger"] = floor["to_first_trigger"]
    bars["floor: empty source, first batch"] = floor["trigger"]
    colors = ["tab:orange" if name.startswith("floor") else "tab:blue" for name in bars]
    first.barh(list(bars), list(bars.values()), color=colors)
    first.invert_yaxis()
    first.set_xlabel("seconds (first batch; worker parts: the slowest first read)")
    for axis in (speed, first):
        axis.tick_params(axis="y", labelsize="small")
        axis.grid(axis="x", alpha=0.3)
    plot_cpu(spent, cpu, loop_cpu_per_gib)
    speed.set_title("bench/source_throughput.py: records/s, the first batch (s), CPU per GiB", fontsize="medium")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return True


def plot_cpu(axis: Any, cpu: list[tuple[float, float]], loop_cpu_per_gib: float) -> None:
    """Bars of each query's CPU per GiB (the JVM's compiler apart) from the 2nd query of the session on, the loop's
    and the goal's (0.8x the loop's) as lines."""
    numbers = [str(number) for number in range(2, len(cpu) + 2)]
    rest = [total - jit for total, jit in cpu]
    axis.bar(numbers, rest, color="tab:blue", label="the query's processes but the JVM's compiler")
    axis.bar(numbers, [jit for _, jit in cpu], bottom=rest, color="lightsteelblue", label="the JVM's JIT compiler")
    axis.axhline(loop_cpu_per_gib, color="grey", label="boto3 loop")
    axis.axhline(0.8 * loop_cpu_per_gib, color="grey", linestyle="--", label="0.8x the loop")
    axis.set_xlabel("query of the session (2: warm; last: hot)")
    axis.set_ylabel("CPU s per GiB")
    axis.set_title("CPU per GiB read between a query's first and last batches", fontsize="medium")
    axis.set_ylim(0, 1.5 * max(loop_cpu_per_gib, *(total for total, _ in cpu)))  # room for the legend
    axis.legend(fontsize="small", loc="upper center", ncol=2)
    axis.grid(axis="y", alpha=0.3)


def row(name: str, records: int, seconds: float, baseline_s: float) -> str:
    return (
        f"| {name:<52} | {records:>9,} | {seconds:8.2f} | {records / seconds:>10,.0f} | {baseline_s / seconds:6.2f} |"
    )


def wait_for_marks(listener: CpuAtBatchEnds, batches: int, timeout_s: float = 30.0) -> None:
    """Until the listener has seen every batch's progress: Spark's listener bus delivers it after the query ends."""
    deadline = time.monotonic() + timeout_s
    while len(listener.marks) < batches and time.monotonic() < deadline:
        time.sleep(0.05)


@dataclass
class MeasuredQuery:
    """A query's wall time and progress, its CPU seconds by kind of process and the quota proxy's, and its rows and
    CPU seconds by part between its first and last batches (``CpuAtBatchEnds.after_first``)."""

    wall_s: float
    progress: list[dict]
    cpu: Counter[str]
    proxy_cpu_s: float
    steady_rows: int
    steady_cpu: Counter[str]
    steady_proxy_cpu_s: float

    @property
    def cpu_s(self) -> float:
        return sum(self.cpu.values())

    @property
    def steady_cpu_s(self) -> float:
        return sum(self.steady_cpu.values())


def measured_query(spark, opts: dict[str, str]) -> MeasuredQuery:
    """One AvailableNow query of ``aws-kinesis`` with ``opts``, its CPU read from /proc at its ends and batches."""
    batch_ends = CpuAtBatchEnds(jvm_pid(spark))
    spark.streams.addListener(batch_ends)
    cpu, proxy_cpu = client_cpu_by_kind(), serving_cpu_s()
    _, wall_s, progress = available_now(spark, "aws-kinesis", opts)
    spent, proxy_cpu_s = client_cpu_by_kind() - cpu, serving_cpu_s() - proxy_cpu
    wait_for_marks(batch_ends, len(progress))
    spark.streams.removeListener(batch_ends)
    return MeasuredQuery(wall_s, progress, spent, proxy_cpu_s, *batch_ends.after_first())


def print_query_cpu(name: str, query: MeasuredQuery, record_size: int, loop_cpu_per_gib: float) -> None:
    """``query``'s CPU per GiB by process, and between its first and last batches by part, against the loop's."""
    gib, spent = sum(p["numInputRows"] for p in query.progress) * record_size / 2**30, query.cpu_s
    shares = (f"{kind} {part / gib:.1f} ({part / spent:.0%})" for kind, part in query.cpu.most_common())
    print(f"the {name} query's CPU seconds per GiB, by process: " + "; ".join(shares))
    gib, spent = query.steady_rows * record_size / 2**30, query.steady_cpu_s
    print(
        f"the {name} query between its first and last batches ({query.steady_rows:,} records): "
        f"{spent / gib:.0f} CPU seconds per GiB, {spent / gib / loop_cpu_per_gib:.2f}x the loop's (the quota proxy "
        f"{query.steady_proxy_cpu_s / gib:.1f} besides); by part:"
    )
    for kind, part in query.steady_cpu.most_common():
        print(f"  {kind:<62} {part / gib:6.1f} ({part / spent:4.0%})")


def steady_cpu_per_gib(queries: list[MeasuredQuery], record_size: int) -> list[tuple[float, float]]:
    """Each query's CPU seconds per GiB between its first and last batches, and the JVM compiler's part of it."""
    per_gib = []
    for query in queries:
        gib = query.steady_rows * record_size / 2**30
        per_gib.append((query.steady_cpu_s / gib, query.steady_cpu[JIT] / gib))
    return per_gib


def print_warm_up(per_gib: list[tuple[float, float]], loop_cpu_per_gib: float) -> None:
    """``steady_cpu_per_gib`` of the queries from the warm one to the hot one, against the loop's."""
    print(
        "the queries from the warm one to the hot one, CPU seconds per GiB between their first and last batches "
        "(the JVM's compiler in it; x the loop): "
        + ", ".join(f"{total:.0f} ({jit:.0f}; {total / loop_cpu_per_gib:.2f}x)" for total, jit in per_gib)
    )


def quota_rate(shards: int, keys: list[str], size: int) -> float:
    """Records/s that ``shards`` shards deliver at AWS's 2 MiB/s each, for ``bench.common.preload``'s
    records (``size`` bytes of data, partition keys ``keys``: Kinesis counts both)."""
    key_bytes = sum(len(key) for key in keys)
    return shards * SHARD_READ_BYTES_PER_S / ((len(keys) * size + key_bytes) / len(keys))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--per-batch", type=int, default=50_000)
    parser.add_argument("--shards", type=int, default=SHARDS)
    parser.add_argument(
        "--shards-per-partition", type=int, default=None, help="kinesis.shardsPerPartition (default: the option's)"
    )
    parser.add_argument(
        "--hashed-keys",
        action="store_true",
        help="spread the records over the shards by their keys' hash (uneven: the quota line is out of reach)",
    )
    parser.add_argument(
        "--warm-up",
        type=int,
        default=WARM_UP_QUERIES,
        help="queries between the warm query and the hot one (the JVM's compiler settles)",
    )
    parser.add_argument("--plot", default=str(PLOT), help="where to write the plot ('' for none)")
    parser.add_argument("--floor", action="store_true", help="internal: print Spark's floor (an empty source)")
    add_quota_flag(parser)
    args = parser.parse_args(argv)
    if args.floor:
        floor_main(args.shards)
        return
    floor = spark_floor(args.shards)
    with local_aws(args, KINESALITE) as aws, tempfile.TemporaryDirectory() as work:
        server = aws.kinesalite
        kinesis = server.client("kinesis")
        direct = server.direct.client("kinesis")
        balanced = not args.hashed_keys
        stream = create_stream(direct, unique_name("bench-throughput"), args.shards)
        keys = preload(direct, stream, args.records, args.size, balanced)

        # This host's speed drifts by tens of percent within minutes: baselines before, between and after ours.
        cpu, proxy_cpu = client_cpu_s(), serving_cpu_s()
        baselines = [read_seconds(boto3_loop, kinesis, stream, args.records)]
        baseline_cpu_s = client_cpu_s() - cpu  # before Spark starts: the loop's own process alone
        loop_proxy_cpu_s = serving_cpu_s() - proxy_cpu
        ceilings = [read_seconds(raw_loop, server.direct, stream, args.records)]

        log_path = os.path.join(work, "timing.jsonl")
        started = time.perf_counter()
        spark = timed_session(log_path)
        startup_s = time.perf_counter() - started
        opts = options(server, stream, os.path.join(work, "metadata"))
        opts["kinesis.maxrecordspertrigger"] = str(args.per_batch)
        if args.shards_per_partition is not None:
            opts["kinesis.shardsperpartition"] = str(args.shards_per_partition)
        cpu = client_cpu_s()
        started_at, wall_s, progress = available_now(spark, "aws-kinesis-timed", opts)
        query_cpu_s = client_cpu_s() - cpu  # the JVM, the source runner and the Python workers, from the query's start
        baselines.append(read_seconds(boto3_loop, kinesis, stream, args.records))
        opts["kinesis.metadatapath"] = os.path.join(work, "metadata-warm")
        warm = measured_query(spark, opts)
        warming = []
        for number in range(args.warm_up + 1):
            opts["kinesis.metadatapath"] = os.path.join(work, f"metadata-hot-{number}")
            warming.append(measured_query(spark, opts))
        hot = warming[-1]
        opts["kinesis.metadatapath"] = os.path.join(work, "metadata-one")
        opts["kinesis.shardsperpartition"] = "1"
        _, one_s, one_progress = available_now(spark, "aws-kinesis", opts)
        spark.stop()
        parts = first_batch_parts(started_at, progress, log_path)

        baselines.append(read_seconds(boto3_loop, kinesis, stream, args.records))
        ceilings.append(read_seconds(raw_loop, server.direct, stream, args.records))
    baseline_s, raw_s = sum(baselines) / len(baselines), sum(ceilings) / len(ceilings)
    warm_s, warm_progress = warm.wall_s, warm.progress
    for run in (progress, warm_progress, *(query.progress for query in warming), one_progress):
        assert sum(p["numInputRows"] for p in run) == args.records, [p["numInputRows"] for p in run]
    steady_rows, steady_s = steady_state(batch_sizes(progress))
    warm_rows, warm_steady_s = steady_state(batch_sizes(warm_progress))
    one_rows, one_steady_s = steady_state(batch_sizes(one_progress))
    layout = "default" if args.shards_per_partition is None else str(args.shards_per_partition)
    spread = "by their keys' hash" if args.hashed_keys else "the same number in each"
    print(
        f"{args.records:,} records x {args.size} B in {args.shards} kinesalite shards ({spread}); Spark local[2]; "
        f"kinesis.shardsPerPartition {layout}"
    )
    print(f"{len(progress)} micro-batches of up to {args.per_batch:,}; Spark start-up {startup_s:.1f} s (not included)")
    print(
        "baseline: " + ", ".join(f"{seconds:.2f}" for seconds in baselines) + " s (before, between and after ours); "
        "ceiling: " + ", ".join(f"{seconds:.2f}" for seconds in ceilings) + " s (before, after); the means count"
    )
    print(f"| {'run':<52} | {'records':>9} | {'seconds':>8} | {'records/s':>10} | {'ratio':>6} |")
    print(f"|{'-' * 54}|{'-' * 11}|{'-' * 10}|{'-' * 12}|{'-' * 8}|  (ratio = our records/s / the baseline's)")
    named_runs = (
        ("", progress),
        ("warm ", warm_progress),
        ("hot ", hot.progress),
        ("one shard per partition ", one_progress),
    )
    for name, run in named_runs:
        print(f"{name}batches (rows, ms):", batch_sizes(run))
    print(row("boto3 GetRecords loop, 1 thread (baseline)", args.records, baseline_s, baseline_s))
    print(row("aws-kinesis AvailableNow -> noop, whole query", args.records, wall_s, baseline_s))
    steady_baseline_s = baseline_s * steady_rows / args.records  # the baseline's time for as many records
    print(row("aws-kinesis, steady state (batches after the first)", steady_rows, steady_s, steady_baseline_s))
    print(row("aws-kinesis whole query again, warm (same session)", args.records, warm_s, baseline_s))
    warm_baseline_s = baseline_s * warm_rows / args.records
    print(row("aws-kinesis warm, steady state", warm_rows, warm_steady_s, warm_baseline_s))
    print(
        row(
            f"aws-kinesis whole query, hot (query {args.warm_up + 3} of the session)",
            args.records,
            hot.wall_s,
            baseline_s,
        )
    )
    print(row("warm, kinesis.shardsPerPartition=1, whole query", args.records, one_s, baseline_s))
    one_baseline_s = baseline_s * one_rows / args.records
    print(row("warm, kinesis.shardsPerPartition=1, steady state", one_rows, one_steady_s, one_baseline_s))
    print(row("ceiling: kinesalite alone (raw bodies, no parsing)", args.records, raw_s, baseline_s))
    quota = quota_rate(args.shards, keys, args.size)
    print(row(f"quota: {args.shards} shards x 2 MiB/s (AWS)", args.records, args.records / quota, baseline_s))
    limit = min(args.records / raw_s, quota)
    print(
        f"what a reader keeping the quotas can reach here: min(ceiling, quota) = {limit:,.0f} records/s; ours / that: "
        f"steady {steady_rows / steady_s / limit:.2f}, warm steady {warm_rows / warm_steady_s / limit:.2f}, "
        f"whole query {args.records / wall_s / limit:.2f}, warm whole query {args.records / warm_s / limit:.2f}; "
        f"shardsPerPartition=1 warm steady {one_rows / one_steady_s / limit:.2f}"
    )
    gib = args.records * args.size / 2**30
    loop_cpu_per_gib = baseline_cpu_s / gib
    print(
        f"CPU seconds per GiB read (every process of the client side, from /proc; {gib:.3f} GiB of payload): "
        f"boto3 loop {loop_cpu_per_gib:.0f}; aws-kinesis whole query {query_cpu_s / gib:.0f} "
        f"({query_cpu_s / baseline_cpu_s:.2f}x the loop), warm {warm.cpu_s / gib:.0f} "
        f"({warm.cpu_s / baseline_cpu_s:.2f}x), hot {hot.cpu_s / gib:.0f} ({hot.cpu_s / baseline_cpu_s:.2f}x)"
    )
    if not args.no_quotas:
        loop_with = baseline_cpu_s + loop_proxy_cpu_s
        with_proxy = (query.cpu_s + query.proxy_cpu_s for query in (warm, hot))
        print(
            "the quota proxy (AWS's stand-in, in this process, not counted above), CPU seconds per GiB: "
            f"boto3 loop {loop_proxy_cpu_s / gib:.1f}, warm query {warm.proxy_cpu_s / gib:.1f}, hot query "
            f"{hot.proxy_cpu_s / gib:.1f}; counted in, warm and hot are "
            + " and ".join(f"{spent / loop_with:.2f}x" for spent in with_proxy)
            + " the loop"
        )
    cpu = steady_cpu_per_gib([warm, *warming], args.size)
    print_warm_up(cpu, loop_cpu_per_gib)
    print_query_cpu("warm", warm, args.size, loop_cpu_per_gib)
    print_query_cpu("hot", hot, args.size, loop_cpu_per_gib)
    print()
    print("first batch, seconds (executor parts: the slowest first read of a Python worker):")
    for name, seconds in parts.items():
        print(f"  {name:<56} {seconds:6.2f}")
    print("Spark's floor, an empty Python source's first batch in a fresh Spark (seconds):")
    print(f"  {'start() -> first trigger':<56} {floor['to_first_trigger']:6.2f}")
    print(f"  {'first batch triggerExecution (addBatch)':<56} {floor['trigger']:6.2f} ({floor['addBatch']:.2f})")
    print(f"  {'worker: pyspark start (fork -> source module)':<56} {floor['worker_start']:6.2f}")
    rates = {
        "boto3 loop (baseline)": args.records / baseline_s,
        "aws-kinesis, whole query": args.records / wall_s,
        "aws-kinesis, steady state": steady_rows / steady_s,
        "aws-kinesis, whole query, warm": args.records / warm_s,
        "aws-kinesis, whole query, hot": args.records / hot.wall_s,
        "aws-kinesis warm, shardsPerPartition=1": args.records / one_s,
        "kinesalite alone (ceiling)": args.records / raw_s,
        "quota (shards x 2 MiB/s)": quota,
    }
    if args.plot and plot(rates, parts, floor, cpu, loop_cpu_per_gib, Path(args.plot)):
        print(f"plot: {args.plot}")
    print_quotas(aws)


if __name__ == "__main__":
    main()
