"""A million triggers on the source's driver: months of a one-second trigger, on a simulated clock.

Run: ``.venv/bin/python -m bench.driver_soak [--triggers 1000000] [--shards 2] [--reshard-every 10000]
[--sample-every 20000] [--tracemalloc] [--csv FILE] [--plot FILE]``; about an hour on one core.

What runs: the source's driver half as Spark drives it each trigger (``KinesisStreamReader.latestOffset``, then
``partitions`` and ``commit`` when a batch is planned: the planner, prober and call windows, shard catalog,
offsets, metadata store, lag report), and the executor half in the same process to move the positions on
(``read``, timed apart). Kinesis is ``bench.standin`` (botocore answered in-process: no socket), with AWS's
retention (24 h: closed shards leave the listing a day after they closed), five-minute iterators and a reshard
every ``--reshard-every`` triggers, a split and then a merge, so shards come and go. Time is ``bench.sim_clock``:
each trigger moves it one second, and a sleep of the connector moves it instead of waiting. Each trigger, each
open shard gets a record with probability 0.3 (so shards sit idle for seconds at a time). The metadata store is
on a tmpfs where there is one: the disk's fsync is not the driver's time.

Sampled every ``--sample-every`` triggers (a split and a merge in each window): the process's Python heap
(``sys.getallocatedblocks`` and the objects the GC tracks, the stand-in's records included: they stop growing once the
first records expire, before the warm-up ends; with ``--tracemalloc`` also the memory allocated since the start and
still held, the stand-in's left out, at about 3.4 times the run time), the metadata store's files and bytes, the offset
JSON Spark would checkpoint, the shards listed, the driver's CPU ms per trigger (the process's CPU while the driver half
runs), the same divided by the CPU ms of a fixed reference workload timed every ``REFERENCE_EVERY`` triggers in the same
process (the median of the window's: it moves with the host's speed, which varied by a fifth within hours here,
docs/testing.md, so the ratio shows what the triggers already run add), its wall ms per trigger (median and 99th
percentile) and, as the baseline in the same run, the median of five naive plans (ListShards, then GetShardIterator and
GetRecords on every shard listed, plain boto3 on the same stand-in). Not judged, beside each sample: the cores the
machine spent on other processes over the window, and those the hypervisor stole (``/proc/stat``).

Judged by rules fixed before the run (``GAUGES`` and ``WARM_UP_SHARE`` below, with ``bench.judge``): after the
warm-up (the first 10 % of the triggers, longer than the 24 h retention, so the first closed shards have left),
each gauge stays within its bound of the median of its first three judged samples, and so does its drift. Also
required: every record put was read exactly once, and no trigger raised. Prints **verdict: PASS** or **FAIL**.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import gc
import json
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from bench import procfs
from bench.judge import Judged, gauge_table
from bench.sim_clock import SimClock
from bench.standin import NOWHERE, RETENTION_S, StandIn, reshard

TRIGGER_S = 1.0  # the query's trigger interval, on the simulated clock
PUT_CHANCE = 0.3  # each trigger, each open shard gets a record with this probability
BASELINE_PLANS = 5  # naive plans timed per sample, their median kept
EXPIRE_EVERY = 600  # triggers between two trims of the stand-in's retention
WARM_UP_SHARE = 0.10
# gauge -> (tolerance as a share of its baseline, least bound): fixed before the runs they judge.
# The driver's CPU per trigger is judged as a share of the reference workload's (``driver_cpu_per_reference``).
GAUGES = {
    "heap_kblocks": (0.05, 20.0),
    "gc_kobjects": (0.05, 5.0),
    "traced_heap_mib": (0.0, 2.0),  # with --tracemalloc only
    "store_files": (0.25, 10.0),
    "store_kib": (0.25, 10.0),
    "offset_bytes": (0.25, 100.0),
    "driver_cpu_per_reference": (0.25, 0.1),
    "driver_ms_median": (0.50, 0.5),
}
# The metadata store's files go to memory where there is a tmpfs: the disk's fsync is not the driver's time.
MEMORY_DIR = "/dev/shm"
REFERENCE_EVERY = 500  # triggers between two timings of the reference workload
RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class Sample:
    trigger: int
    open_shards: int
    listed_shards: int
    heap_kblocks: float
    gc_kobjects: float
    traced_heap_mib: float
    store_files: int
    store_kib: float
    offset_bytes: int
    driver_cpu_ms: float
    reference_cpu_ms: float  # the reference workload's CPU ms, the window's median
    driver_cpu_per_reference: float  # driver_cpu_ms / reference_cpu_ms: judged
    driver_ms_median: float
    driver_ms_p99: float
    read_ms_median: float
    baseline_ms: float
    calls_per_trigger: float
    batches: int
    other_cores: float = 0.0  # cores the machine spent on other processes over the window (not judged)
    steal_cores: float = 0.0  # cores the hypervisor gave to other guests over the window (not judged)


@dataclass
class Run:
    """What the loop keeps between samples."""

    standin: StandIn
    stream: str
    metadata: Path
    reader: Any
    calls: Counter
    start: dict
    put: int = 0
    read: int = 0
    batches: int = 0
    errors: int = 0
    driver_ms: list[float] = field(default_factory=list)
    read_ms: list[float] = field(default_factory=list)
    driver_cpu_s: float = 0.0
    reference_ms: list[float] = field(default_factory=list)  # the window's timings of the reference workload
    window: tuple[float, ...] = ()  # perf_counter, own CPU, machine busy and steal seconds at the window's start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--triggers", type=int, default=1_000_000)
    parser.add_argument("--shards", type=int, default=2, help="open shards at the start (a split adds one)")
    parser.add_argument("--reshard-every", type=int, default=10_000)
    parser.add_argument("--sample-every", type=int, default=20_000, help="a split and a merge in each window")
    parser.add_argument("--retention-s", type=float, default=RETENTION_S, help="the stream's retention")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--tracemalloc", action="store_true", help="also trace the driver's allocations (runs about 3.4 times slower)"
    )
    parser.add_argument("--shapes-from", default="", help="a running kinesalite's endpoint to record answer shapes")
    parser.add_argument("--csv", default=str(RESULTS / "driver_soak.csv"))
    parser.add_argument("--plot", default=str(RESULTS / "driver_soak.png"), help="'' for none")
    args = parser.parse_args(argv)
    assert "pyspark_aws_kinesis" not in sys.modules, "the simulated clock must be installed before the connector"
    standin = recorded_standin(args.shapes_from)
    clock = SimClock().install()
    if args.tracemalloc:
        tracemalloc.start()
    started = time.perf_counter()
    samples, run = soak(args, standin, clock)
    wall_s = time.perf_counter() - started
    SimClock.uninstall()
    write_csv(Path(args.csv), samples)
    verdict = report(args, samples, run, clock, wall_s)
    if args.plot:
        plot(Path(args.plot), samples, args.triggers)
        print(f"plot: {args.plot}")
    return 0 if verdict else 1


def recorded_standin(endpoint: str) -> StandIn:
    """The stand-in, in the answer shapes of a real kinesalite (at ``endpoint``, or started for that alone)."""
    from localaws import LocalAws
    from localaws.servers import KINESALITE, aws_client

    if endpoint:
        return StandIn.recorded(aws_client("kinesis", endpoint))
    with LocalAws([KINESALITE], quotas=False) as aws:
        return StandIn.recorded(aws.kinesalite.client("kinesis"))


def soak(args: argparse.Namespace, standin: StandIn, clock: SimClock) -> tuple[list[Sample], Run]:
    """Trigger ``args.triggers`` times, a sample every ``args.sample_every``; the reshards and the workload."""
    rng = random.Random(args.seed)
    samples: list[Sample] = []
    with tempfile.TemporaryDirectory(dir=MEMORY_DIR if Path(MEMORY_DIR).is_dir() else None) as work:
        run = start(standin, args.shards, args.retention_s, Path(work))
        for trigger in range(1, args.triggers + 1):
            if trigger % args.reshard_every == 0:
                reshard(standin, run.stream, split=(trigger // args.reshard_every) % 2 == 1, rng=rng)
            if trigger % EXPIRE_EVERY == 0:
                standin.expire(run.stream)
            for shard in standin.streams[run.stream].open_shards():
                if rng.random() < PUT_CHANCE:
                    standin.put(run.stream, shard, f"{run.put}".encode())
                    run.put += 1
            one_trigger(run)
            clock.advance(TRIGGER_S)
            if trigger % REFERENCE_EVERY == 0:
                run.reference_ms.append(reference_cpu_ms())
            if trigger % args.sample_every == 0:
                samples.append(sample(run, trigger, args.sample_every))
                print(line(samples[-1]), flush=True)
        for _ in range(10):  # the records of the last triggers
            one_trigger(run)
            clock.advance(TRIGGER_S)
    return samples, run


def start(standin: StandIn, shards: int, retention_s: float, work: Path) -> Run:
    """A new query's reader on a new stream, every client of it answered by the stand-in."""
    from bench.common import options
    from pyspark_aws_kinesis.aws.clients import kinesis_client, kinesis_reader_client
    from pyspark_aws_kinesis.source.stream_reader import KinesisStreamReader

    stream = "driver-soak"
    standin.create(stream, shards, retention_s)
    chosen = options(NOWHERE, stream, str(work / "metadata"))  # type: ignore[arg-type]
    del chosen["kinesis.getrecords.fetchintervalms"]  # the query's defaults, fetch interval included
    reader = KinesisStreamReader(None, chosen)  # type: ignore[arg-type]
    calls: Counter = Counter()
    for client in (kinesis_client(reader.settings.client), kinesis_reader_client(reader.settings.client)):
        standin.hook(client)
        client.meta.events.register("before-call.kinesis", lambda model, **_: calls.update([model.name]))
    run = Run(standin, stream, work / "metadata", reader, calls, reader.initialOffset())
    run.window = (time.perf_counter(), time.process_time(), *procfs.machine_cpu_s())
    return run


def one_trigger(run: Run) -> None:
    """What Spark asks of the driver each trigger, and the batch's reads when it plans one."""
    began, cpu = time.perf_counter(), time.process_time()
    try:
        end = run.reader.latestOffset(run.start, None)
        partitions = run.reader.partitions(run.start, end) if end != run.start else []
    except Exception as exc:  # a failed trigger is counted and shown; Spark would retry the query
        run.errors += 1
        print(f"trigger failed: {exc!r}", flush=True)
        return
    planned, planned_cpu = time.perf_counter(), time.process_time()
    for partition in partitions:
        run.read += sum(batch.num_rows for batch in run.reader.read(partition))
    read, read_cpu = time.perf_counter(), time.process_time()
    if partitions:
        run.reader.commit(end)
        run.batches += 1
        run.start = end
    run.driver_cpu_s += planned_cpu - cpu + time.process_time() - read_cpu
    run.driver_ms.append((planned - began + time.perf_counter() - read) * 1000)
    run.read_ms.append((read - planned) * 1000)


def sample(run: Run, trigger: int, window: int) -> Sample:
    kept = run.standin.streams[run.stream]
    files = [path for path in run.metadata.rglob("*") if path.is_file()]
    driver, reads = sorted(run.driver_ms), [ms for ms in run.read_ms if ms > 0]
    calls = sum(run.calls.values())
    run.calls.clear()
    run.driver_ms.clear()
    run.read_ms.clear()
    cpu_ms, run.driver_cpu_s = run.driver_cpu_s * 1000 / window, 0.0
    reference = statistics.median(run.reference_ms or [reference_cpu_ms()])
    run.reference_ms.clear()
    other_cores, steal_cores = machine_beside(run)
    return Sample(
        trigger=trigger,
        open_shards=len(kept.open_shards()),
        listed_shards=len(kept.shards),
        heap_kblocks=sys.getallocatedblocks() / 1000,
        gc_kobjects=len(gc.get_objects()) / 1000,
        traced_heap_mib=traced_heap_mib(),
        store_files=len(files),
        store_kib=sum(path.stat().st_size for path in files) / 1024,
        offset_bytes=len(json.dumps(run.start)),
        driver_cpu_ms=cpu_ms,
        reference_cpu_ms=reference,
        driver_cpu_per_reference=cpu_ms / reference,
        driver_ms_median=statistics.median(driver),
        driver_ms_p99=driver[int(0.99 * (len(driver) - 1))],
        read_ms_median=statistics.median(reads) if reads else 0.0,
        baseline_ms=naive_plan_ms(run),
        calls_per_trigger=calls / window,
        batches=run.batches,
        other_cores=other_cores,
        steal_cores=steal_cores,
    )


def machine_beside(run: Run) -> tuple[float, float]:
    """Cores the machine spent on other processes, and stolen by the hypervisor, since the last sample: what may
    move the CPU a trigger takes (a core shared with other work runs slower)."""
    busy, steal = procfs.machine_cpu_s()
    now = (time.perf_counter(), time.process_time(), busy, steal)
    wall = now[0] - run.window[0]
    other = (now[2] - run.window[2]) - (now[1] - run.window[1])
    stolen = now[3] - run.window[3]
    run.window = now
    return other / wall, stolen / wall


_REFERENCE_DOCUMENT = {f"shardId-{i:012d}": {"sequence": str(10**40 + i), "records": i} for i in range(40)}


def reference_cpu_ms() -> float:
    """The CPU ms of a fixed pure-Python workload of the driver's kind (JSON out and back, dicts, strings): the
    yardstick of the host's speed at this moment."""
    began = time.process_time()
    for _ in range(8):
        json.loads(json.dumps(_REFERENCE_DOCUMENT, sort_keys=True))
    return (time.process_time() - began) * 1000


def traced_heap_mib() -> float:
    """Python memory allocated since the run began and still held, but what the stand-in itself allocated (0
    without ``--tracemalloc``)."""
    import bench.standin

    if not tracemalloc.is_tracing():
        return 0.0
    snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, bench.standin.__file__)])
    return sum(stat.size for stat in snapshot.statistics("filename")) / 2**20


def naive_plan_ms(run: Run) -> float:
    """The baseline: a hand-written driver asking every shard listed, one call after another (bench.scale);
    the median of ``BASELINE_PLANS``."""
    from bench.scale import naive_plan
    from pyspark_aws_kinesis.aws.clients import kinesis_client

    client = kinesis_client(run.reader.settings.client)
    before = Counter(run.calls)
    elapsed = []
    for _ in range(BASELINE_PLANS):
        began = time.perf_counter()
        with contextlib.suppress(Exception):  # a shard that left between list and ask: time it all the same
            naive_plan(client, run.stream)
        elapsed.append((time.perf_counter() - began) * 1000)
    run.calls.clear()
    run.calls.update(before)  # the baseline's calls are not the query's
    return statistics.median(elapsed)


def line(s: Sample) -> str:
    return (
        f"trigger {s.trigger:>9,}: shards {s.open_shards} open / {s.listed_shards} listed; heap "
        f"{s.heap_kblocks:.0f}k blocks, {s.gc_kobjects:.0f}k objects, {s.traced_heap_mib:.2f} MiB traced; store "
        f"{s.store_files} files {s.store_kib:.0f} KiB; offset {s.offset_bytes} B; driver {s.driver_cpu_ms:.2f} CPU "
        f"ms ({s.driver_cpu_per_reference:.2f} x reference {s.reference_cpu_ms:.2f}), {s.driver_ms_median:.2f} ms "
        f"(p99 {s.driver_ms_p99:.2f}); read {s.read_ms_median:.2f} ms; baseline "
        f"{s.baseline_ms:.2f} ms; {s.calls_per_trigger:.2f} calls/trigger; beside it {s.other_cores:.2f} cores busy, "
        f"{s.steal_cores:.2f} stolen"
    )


def judge(samples: list[Sample], triggers: int) -> dict[str, Judged]:
    judged = [s for s in samples if s.trigger > WARM_UP_SHARE * triggers]
    if len(judged) < 3:
        return {}
    traced = judged[0].traced_heap_mib > 0
    return {
        name: Judged.of([(s.trigger, float(getattr(s, name))) for s in judged], tolerance, slack)
        for name, (tolerance, slack) in GAUGES.items()
        if traced or name != "traced_heap_mib"
    }


def report(args: argparse.Namespace, samples: list[Sample], run: Run, clock: SimClock, wall_s: float) -> bool:
    found = judge(samples, args.triggers)
    exact = run.read == run.put
    passed = bool(found) and all(j.within for j in found.values()) and exact and run.errors == 0
    print(
        f"{args.triggers:,} triggers ({clock.elapsed_s / 86400:.1f} simulated days) in {wall_s / 60:.1f} min; "
        f"{run.batches:,} batches; records put {run.put:,}, read {run.read:,}; failed triggers {run.errors}"
    )
    print(f"judged after trigger {int(WARM_UP_SHARE * args.triggers):,}")
    print("\n".join(gauge_table(found)))
    first, last = samples[len(samples) // 10], samples[-1]
    print(
        f"ratio baseline / driver median: {first.baseline_ms / first.driver_ms_median:.1f} at trigger "
        f"{first.trigger:,}, {last.baseline_ms / last.driver_ms_median:.1f} at {last.trigger:,}"
    )
    print("verdict: " + ("PASS" if passed else "FAIL"))
    return passed


def write_csv(path: Path, samples: list[Sample]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, [f.name for f in fields(Sample)])
        writer.writeheader()
        writer.writerows(asdict(s) for s in samples)


def plot(path: Path, samples: list[Sample], triggers: int) -> None:
    """Heap, store, offset and time per trigger against triggers run, the warm-up shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [s.trigger / 1e6 for s in samples]
    panels = [
        (
            "heap (thousands)",
            [("allocated blocks", [s.heap_kblocks for s in samples]), ("GC objects", [s.gc_kobjects for s in samples])]
            + ([("traced MiB x 10", [10 * s.traced_heap_mib for s in samples])] if samples[0].traced_heap_mib else []),
        ),
        ("metadata store", [("files", [s.store_files for s in samples]), ("KiB", [s.store_kib for s in samples])]),
        (
            "offset JSON (bytes), shards",
            [
                ("bytes / 10", [s.offset_bytes / 10 for s in samples]),
                ("shards listed", [s.listed_shards for s in samples]),
            ],
        ),
        (
            "ms per trigger",
            [
                ("driver, CPU (mean)", [s.driver_cpu_ms for s in samples]),
                ("reference workload, CPU", [s.reference_cpu_ms for s in samples]),
                ("driver, median", [s.driver_ms_median for s in samples]),
                ("driver, p99", [s.driver_ms_p99 for s in samples]),
                ("baseline (naive plan)", [s.baseline_ms for s in samples]),
            ],
        ),
    ]
    figure, axes = plt.subplots(len(panels), 1, figsize=(8, 9), sharex=True)
    for ax, (title, series) in zip(axes, panels, strict=True):
        for label, values in series:
            ax.plot(x, values, marker=".", label=label or None)
        ax.axvspan(0, WARM_UP_SHARE * triggers / 1e6, color="grey", alpha=0.15)
        ax.set_ylabel(title, fontsize=8)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        if any(label for label, _ in series):
            ax.legend(fontsize=7)
    axes[-1].set_xlabel("triggers (millions); shaded: warm-up, not judged")
    figure.suptitle("The source's driver over a million one-second triggers (simulated clock, stand-in Kinesis)")
    figure.tight_layout()
    figure.savefig(path, dpi=100)


if __name__ == "__main__":
    sys.exit(main())
