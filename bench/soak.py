"""Soak: a kinesis -> kinesis passthrough query at a steady rate for a long time; memory must stay flat and
nothing may be lost.

Run: ``.venv/bin/python -m bench.soak [--minutes 30] [--rate 1000] [--shards 2] [--no-quotas]`` (also
``bench.run_all soak``). The generator and the query meet AWS's Kinesis quotas by default (``bench.common``); the
streams are created and the sink read back directly.

The generator's sender (``generator.run``) puts ``--rate`` records/s, each with a unique id, into a kinesalite
stream; a local[2] query reads it with our source and writes ``data`` and ``partitionKey`` with our sink
(KPL aggregation on, its default) into a second stream. Every 10 s it samples the driver JVM's RSS, the summed
RSS of the Python workers that JVM started (``pyspark.daemon`` and its workers, found as its descendants so
other Spark processes on the machine do not count), this driver's own RSS, and the lag: records sent minus
records the query has read (from the query progress). Warm-up (JIT, worker pools, connection pools) ends at the
later of 20 % of the run (at least 60 s) and the first sample where the query had caught up (lag under 10 s of
records); after it, the driver JVM's RSS and the Python workers' mean RSS per worker (their sum moves with how
many workers Spark keeps, which is not a leak) must stay within +-10 % of their first post-warm-up samples.
At the end the query drains, then the sink stream is read back with boto3 and ``connector.kpl``:
every sent id must be there exactly once.

Writes ``bench/results/soak.csv`` and ``bench/results/soak.png`` (needs matplotlib). The baseline of this
benchmark is the sender itself: the sent ids are the reference the sink is compared with.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import generator
from bench import common
from connector.kpl import deaggregate, is_aggregated
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY, KINESALITE
from localaws.streams import create_stream, iterate_shard, list_shard_ids, unique_name

RESULTS = Path(__file__).resolve().parent / "results"
SAMPLE_EVERY_S = 10.0
TOLERANCE = 0.10
MIN_SAMPLES_AFTER_WARM_UP = 3
TEMPLATE = '{"id": "{{random.uuid}}", "country": "{{random.arrayElement(["Spain","Portugal","Finland"])}}"}'


@dataclass
class Sample:
    t_s: float
    sent: int
    read: int
    lag_records: int
    last_batch_ms: int
    driver_jvm_rss_mb: float
    python_workers_rss_mb: float
    python_workers: int
    python_worker_mean_rss_mb: float
    driver_python_rss_mb: float


JUDGED = ("driver_jvm_rss_mb", "python_worker_mean_rss_mb")


def rss_mb(pid: int) -> float:
    """Resident set size of ``pid`` in MiB (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def descendants(root: int) -> list[int]:
    """Every live process below ``root`` (from /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def python_workers(jvm_pid: int) -> list[int]:
    """The pyspark daemon and worker processes the driver JVM started."""
    workers = []
    for pid in descendants(jvm_pid):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"pyspark" in command:
            workers.append(pid)
    return workers


class Sampler(threading.Thread):
    """Every ``SAMPLE_EVERY_S``: memory of the driver JVM, the Python workers and this process, and the lag."""

    def __init__(self, query, jvm_pid: int, sent: list[int]) -> None:
        super().__init__(daemon=True)
        self.query, self.jvm_pid, self.sent = query, jvm_pid, sent
        self.samples: list[Sample] = []
        self.read_by_batch: dict[int, int] = {}
        self.started = time.monotonic()
        self.done = threading.Event()

    def read_so_far(self) -> tuple[int, int]:
        """Records read by the query so far (each batch counted once) and the last batch's duration."""
        last_ms = 0
        for progress in self.query.recentProgress:
            self.read_by_batch[progress.batchId] = progress.numInputRows
            last_ms = int(progress.durationMs.get("triggerExecution", 0))
        return sum(self.read_by_batch.values()), last_ms

    def sample(self) -> Sample:
        read, last_ms = self.read_so_far()
        workers = python_workers(self.jvm_pid)
        workers_rss = sum(rss_mb(pid) for pid in workers)
        return Sample(
            t_s=round(time.monotonic() - self.started, 1),
            sent=self.sent[0],
            read=read,
            lag_records=self.sent[0] - read,
            last_batch_ms=last_ms,
            driver_jvm_rss_mb=round(rss_mb(self.jvm_pid), 1),
            python_workers_rss_mb=round(workers_rss, 1),
            python_workers=len(workers),
            python_worker_mean_rss_mb=round(workers_rss / len(workers), 1) if workers else 0.0,
            driver_python_rss_mb=round(rss_mb(os.getpid()), 1),
        )

    def run(self) -> None:
        while not self.done.wait(SAMPLE_EVERY_S):
            self.samples.append(self.sample())
            print(json.dumps(asdict(self.samples[-1])), flush=True)


def record_id(data: bytes) -> str:
    return json.loads(data)["id"]


def sink_ids(kinesis, stream: str) -> Counter[str]:
    """Every user record id in ``stream``, de-aggregating KPL records (the sink aggregates by default)."""
    ids: Counter[str] = Counter()
    for shard_id in list_shard_ids(kinesis, stream):
        for record in iterate_shard(kinesis, stream, shard_id):
            data = record["Data"]
            users = [user.data for user in deaggregate(data)] if is_aggregated(data) else [data]
            ids.update(record_id(user) for user in users)
    return ids


def warm_up_s(samples: list[Sample], run_s: float, rate: float) -> float:
    """Warm-up ends at the later of 20 % of the run (at least 60 s) and the first sample where the query had caught
    up (lag under 10 s of records): Spark's start, the first batches and the worker pools are behind it by then.
    Infinite when the query never caught up."""
    caught_up = next((s.t_s for s in samples if s.read and s.lag_records < 10 * rate), float("inf"))
    return max(60.0, 0.2 * run_s, caught_up)


def rss_changes(samples: list[Sample], warm_up: float) -> dict[str, float]:
    """Per judged RSS series: the largest relative change from the first post-warm-up sample (NaN: no sample).

    Python workers are judged per worker (their mean RSS): Spark reaps idle workers and starts new ones, so their
    sum moves with their count, which is not a leak; a leaking worker still moves the mean."""
    after = [s for s in samples if s.t_s >= warm_up]
    changes = {}
    for name in JUDGED:
        values = [getattr(s, name) for s in after]
        base = values[0] if values else 0.0
        changes[name] = max(abs(v - base) / base for v in values) if base else float("nan")
    return changes


def write_csv(samples: list[Sample], path: Path) -> None:
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=[f.name for f in fields(Sample)])
        writer.writeheader()
        writer.writerows(asdict(s) for s in samples)


def plot(samples: list[Sample], warm_up: float, path: Path, title: str) -> bool:
    """RSS and lag over time, warm-up shaded; False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    minutes = [s.t_s / 60 for s in samples]
    figure, (memory, lag) = plt.subplots(2, 1, sharex=True, figsize=(9, 6))
    for name, label in (
        ("driver_jvm_rss_mb", "driver JVM"),
        ("python_workers_rss_mb", "Python workers (sum)"),
        ("python_worker_mean_rss_mb", "Python worker (mean)"),
        ("driver_python_rss_mb", "driver Python"),
    ):
        memory.plot(minutes, [getattr(s, name) for s in samples], label=label)
    lag.plot(minutes, [s.lag_records for s in samples], color="tab:red", label="records sent, not yet read")
    for axis in (memory, lag):
        axis.axvspan(0, min(warm_up, samples[-1].t_s) / 60, color="grey", alpha=0.15, label="warm-up")
        axis.legend(loc="upper left", fontsize="small")
        axis.grid(alpha=0.3)
    memory.set_ylabel("RSS (MiB)")
    lag.set_ylabel("lag (records)")
    lag.set_xlabel("minutes")
    memory.set_title(title)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return True


def run_query(spark, server, source: str, sink: str, work: Path):
    options = common.options(server, source, str(work / "metadata"))
    sink_options = {
        "kinesis.streamName": sink,
        "kinesis.endpointUrl": server.endpoint_url,
        "kinesis.awsAccessKeyId": DUMMY_ACCESS_KEY,
        "kinesis.awsSecretKey": DUMMY_SECRET_KEY,
    }
    return (
        spark.readStream.format("aws-kinesis")
        .options(**options)
        .load()
        .select("data", "partitionKey")
        .writeStream.format("aws-kinesis")
        .options(**sink_options)
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(processingTime="1 second")
        .start()
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=1000.0, help="records/s")
    parser.add_argument("--shards", type=int, default=2)
    common.add_quota_flag(parser)
    args = parser.parse_args(argv)
    run_s = args.minutes * 60
    RESULTS.mkdir(exist_ok=True)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", DUMMY_ACCESS_KEY)  # the generator's client: kinesalite takes any
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", DUMMY_SECRET_KEY)
    with common.local_aws(args, KINESALITE) as aws, tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        server = aws.kinesalite
        kinesis = server.direct.client("kinesis")  # creating the streams and the check: not what is measured
        source = create_stream(kinesis, unique_name("soak-src"), args.shards)
        sink = create_stream(kinesis, unique_name("soak-sink"), args.shards)
        spark = common.spark_session()
        query = run_query(spark, server, source, sink, Path(tmp))
        jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
        sent_ids: Counter[str] = Counter()
        sent = [0]
        lock = threading.Lock()

        def on_sent(batch: list[tuple[str, bytes]]) -> None:  # called by the sender's worker threads
            with lock:
                sent_ids.update(record_id(data) for _, data in batch)
                sent[0] += len(batch)

        sampler = Sampler(query, jvm_pid, sent)
        sampler.start()
        summary = generator.run(
            source,
            TEMPLATE,
            rate=args.rate,
            duration_s=run_s,
            endpoint_url=server.endpoint_url,
            region="us-east-1",
            workers=2,
            on_sent=on_sent,
        )
        drain_deadline = time.monotonic() + 300
        while sampler.read_so_far()[0] < sent[0] and time.monotonic() < drain_deadline and query.isActive:
            time.sleep(1)
        time.sleep(3)  # the last batch's sink commit
        sampler.done.set()
        sampler.join()
        sampler.samples.append(sampler.sample())
        error = query.exception()
        query.stop()
        got = sink_ids(kinesis, sink)
    samples = sampler.samples
    missing = sum((sent_ids - got).values())
    duplicated = sum(count - 1 for count in got.values() if count > 1)
    extra = sum(count for record, count in got.items() if record not in sent_ids)
    warm_up = warm_up_s(samples, run_s, args.rate)
    changes = rss_changes(samples, warm_up)
    after = sum(1 for s in samples if s.t_s >= warm_up)
    # NaN (no sample after warm-up) is not flat; fewer than MIN_SAMPLES_AFTER_WARM_UP prove nothing either.
    flat = after >= MIN_SAMPLES_AFTER_WARM_UP and all(change <= TOLERANCE for change in changes.values())
    write_csv(samples, RESULTS / "soak.csv")
    title = f"soak: {args.rate:,.0f} records/s for {args.minutes:g} min, kinesalite, local[2]"
    plotted = plot(samples, warm_up, RESULTS / "soak.png", title)
    print(f"\n{title}")
    print(f"sent {summary.records:,} records ({summary.failed:,} failed to send); sink holds {sum(got.values()):,}")
    print(f"missing {missing:,}, duplicated {duplicated:,}, unexpected {extra:,}; query error: {error}")
    print(f"warm-up: first {warm_up:.0f} s; largest RSS change after it (limit +-{TOLERANCE:.0%}):")
    for name, change in changes.items():
        print(f"  {name:<24}{change:>8.1%}")
    verdict = "stayed" if flat else "was NOT shown to stay"
    print(f"RSS {verdict} within +-{TOLERANCE:.0%}: {after} of {len(samples)} samples after warm-up")
    print(
        f"wrote {RESULTS / 'soak.csv'}"
        + (f" and {RESULTS / 'soak.png'}" if plotted else " (no plot: pip install matplotlib)")
    )
    common.print_quotas(aws)
    lost_nothing = missing == 0 and duplicated == 0 and extra == 0 and error is None
    print("verdict:", "PASS" if lost_nothing and flat else "FAIL")
    return 0 if lost_nothing and flat else 1


if __name__ == "__main__":
    raise SystemExit(main())
