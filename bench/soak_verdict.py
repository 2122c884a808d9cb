"""The soak's verdict, by rules fixed before a run: which gauges are judged and how far each may move
(``GAUGES``), which samples count (after the warm-up, not just after a restart, not in the drain), and what the
sink must hold against the source stream (``Tally``). A bound changed after a run needs a new run to count.
Every gauge is judged on its rises (``RISES_ONLY``): the soak shows what stays bounded, and a fall is not growth.

Who calls it: ``bench.soak`` at the end of a run, and ``bench.soak --rejudge`` on a recorded ``soak.csv``.
Not a benchmark itself (run_all skips it).
"""

from __future__ import annotations

import csv
from collections import Counter
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from bench.judge import Judged, gauge_table

TOLERANCE = 0.10
# Since 2026-11-30 18:00 UTC: the 60-minute enhanced fan-out soak at bbc12ef failed on the JVM's threads falling
# from 287 to 147 in its last minutes (bench/results/soak_efo.txt); both directions were judged before.
RISES_ONLY = True
MIN_SAMPLES_AFTER_WARM_UP = 3
REWARM_S = 120.0  # after a restart: Spark's start, the first batches, the JIT


@dataclass
class Sample:
    t_s: float
    incarnation: int
    sent: int
    read: int
    lag_records: int
    jvm_heap_after_gc_mb: float
    jvm_metaspace_mb: float
    jvm_code_cache_mb: float
    jvm_rss_mb: float
    jvm_threads: int
    jvm_fds: int
    jvm_sockets: int
    runner_rss_mb: float
    runner_threads: int
    runner_fds: int
    runner_sockets: int
    workers: int
    worker_mean_rss_mb: float
    worker_max_rss_mb: float
    workers_fds: int
    workers_sockets: int
    brokers: int
    broker_rss_mb: float
    broker_fds: int
    broker_sockets: int
    driver_python_rss_mb: float
    store_entries: int
    store_mb: float
    checkpoint_files: int
    checkpoint_mb: float
    harness_rss_mb: float
    jvm_young_after_gc_mb: float = 0.0  # allocated between the full GC and the reading (absent in older CSVs)


# judged gauge -> its constant slack (the bound on a rise is 10 % of the baseline or this, whichever is wider)
GAUGES: dict[str, float] = {
    # What a full GC leaves holds the micro-batch in flight (up to ~10 s of records at 1,000/s): samples of a flat
    # heap spread over ~35 MiB (the first 60-minute run: 67-101 MiB, each 15-minute driver's mean 83-85 MiB).
    "jvm_heap_after_gc_mb": 24.0,
    "jvm_metaspace_mb": 8.0,
    # Spark's pools start and retire threads on demand (the first 60-minute run: 260-318, no trend).
    "jvm_threads": 40,
    "jvm_fds": 16,
    "jvm_sockets": 8,
    "runner_rss_mb": 8.0,
    "runner_threads": 4,
    "runner_fds": 8,
    "runner_sockets": 4,
    "worker_mean_rss_mb": 8.0,
    "worker_max_rss_mb": 16.0,
    "driver_python_rss_mb": 8.0,
    "store_entries_per_shard": 25,  # a batch's document per shard, for the batches kept: per open shard
    "store_mb": 1.0,
    "checkpoint_files": 50,
    "checkpoint_mb": 1.0,
}
EFO_GAUGES: dict[str, float] = {"broker_rss_mb": 8.0, "broker_fds": 8, "broker_sockets": 4}
# Plotted, not judged, and why (soak.txt says so).
NOT_JUDGED = {
    "jvm_young_after_gc_mb": "what the query allocated between the full GC and the heap's reading (young regions): "
    "not held, so not part of the heap after GC",
    "jvm_code_cache_mb": "JIT-compiled code: the JVM caps it (ReservedCodeCacheSize, 240 MiB by default) and flushes "
    "cold code; every restart empties it and it re-grows for longer than the re-warm allowance",
}
RESHARD_SETTLE_S = 300.0  # after a split or merge, the retired shard's documents age out with its last batches


def warm_up_s(samples: list[Sample], run_s: float, rate: float) -> float:
    """The later of 20 % of the run (at least 60 s) and the first sample where the query had caught up (lag under
    10 s of records); infinite when it never caught up."""
    caught_up = next((s.t_s for s in samples if s.read and s.lag_records < 10 * rate), float("inf"))
    return max(60.0, 0.2 * run_s, caught_up)


def judged_samples(samples: list[Sample], warm_up: float, restarts: list[float], end_s: float) -> list[Sample]:
    """After warm-up and until the records stop coming at ``end_s`` (the drain after it is an idle query: Spark
    retires pool threads, Python workers and the subscription broker exit), with a driver up, not within
    ``REWARM_S`` after a restart."""
    return [
        s
        for s in samples
        if warm_up <= s.t_s <= end_s and s.jvm_rss_mb and not any(0 <= s.t_s - r < REWARM_S for r in restarts)
    ]


def open_shards_at(t_s: float, shards: int, reshards: list[tuple[float, str]]) -> int:
    """The source stream's open shards at harness second ``t_s``: a split adds one, a merge takes one away."""
    return shards + sum(1 if event == "split" else -1 for at, event in reshards if at <= t_s)


def gauge_points(name: str, samples: list[Sample], shards: int, reshards: list[tuple[float, str]]):
    """(second, value) of ``name`` in ``samples``; ``store_entries_per_shard`` divides the store's entries by the
    open shards, leaving out ``RESHARD_SETTLE_S`` after a reshard."""
    if name != "store_entries_per_shard":
        return [(s.t_s, float(getattr(s, name))) for s in samples]
    settled = [s for s in samples if not any(0 <= s.t_s - at < RESHARD_SETTLE_S for at, _ in reshards)]
    return [(s.t_s, s.store_entries / open_shards_at(s.t_s, shards, reshards)) for s in settled]


def bounds(
    samples: list[Sample], judged: dict[str, float], shards: int, reshards: list[tuple[float, str]]
) -> dict[str, Judged]:
    """Each judged gauge's verdict over the judged samples."""
    found = {}
    for name, slack in judged.items():
        points = gauge_points(name, samples, shards, reshards)
        if not points:
            continue
        found[name] = Judged.of(points, TOLERANCE, slack, rises_only=RISES_ONLY)
    return found


def gauge_lines(found: dict[str, Judged]) -> list[str]:
    return gauge_table(found) + [f"{name:<24}not judged: {why}" for name, why in NOT_JUDGED.items()]


def verdict_on_gauges(args, samples: list[Sample], restarts: list[float], reshards: list[tuple[float, str]]):
    """(warm-up s, judged samples, per-gauge verdicts, bounded?) of a run: live at its end, or from its CSV."""
    judged = {**GAUGES, **(EFO_GAUGES if args.efo else {})}
    warm_up = warm_up_s(samples, args.minutes * 60, args.rate)
    kept = judged_samples(samples, warm_up, restarts, args.minutes * 60)
    found = bounds(kept, judged, args.shards, reshards)
    flat = len(kept) >= MIN_SAMPLES_AFTER_WARM_UP and all(judged.within for judged in found.values())
    return warm_up, kept, found, flat


def read_csv(path: Path) -> list[Sample]:
    """The samples ``write_csv`` wrote."""
    kinds = {f.name: f.type for f in fields(Sample)}
    with path.open(newline="") as source:
        return [
            Sample(**{name: int(float(v)) if kinds[name] == "int" else float(v) for name, v in row.items()})
            for row in csv.DictReader(source)
        ]


def write_csv(samples: list[Sample], path: Path) -> None:
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=[f.name for f in fields(Sample)])
        writer.writeheader()
        writer.writerows(asdict(s) for s in samples)


@dataclass(frozen=True)
class Tally:
    """The sink's content against the source stream's, read back at the end.

    The query's duty is to the source stream as it stands: a put the sender retried after a timeout may have been
    stored twice (or stored although the sender gave up on it), and the query must then deliver it as often as the
    stream holds it. What the sender saw acknowledged must all be in the source stream.
    """

    acknowledged: int
    held: int
    unacknowledged_held: int  # in the source stream although the sender saw no acknowledgement (timed-out puts)
    lost_by_source: int  # acknowledged, yet not in the source stream
    missing: int  # in the source stream, not in the sink
    duplicated: int  # in the sink more often than in the source stream
    unexpected: int  # in the sink, never in the source stream

    @classmethod
    def of(cls, acknowledged: Counter[str], held: Counter[str], got: Counter[str]) -> Tally:
        return cls(
            acknowledged=sum(acknowledged.values()),
            held=sum(held.values()),
            unacknowledged_held=sum((held - acknowledged).values()),
            lost_by_source=sum((acknowledged - held).values()),
            missing=sum(1 for record in held if record not in got),
            duplicated=sum(max(0, count - max(held[record], 1)) for record, count in got.items()),
            unexpected=sum(count for record, count in got.items() if record not in held),
        )

    def lines(self) -> list[str]:
        return [
            f"source stream holds {self.held:,} records ({self.acknowledged:,} acknowledged to the sender, "
            f"{self.unacknowledged_held:,} stored by puts it timed out on, {self.lost_by_source:,} lost)",
            f"sink: missing {self.missing:,}, duplicated {self.duplicated:,}, unexpected {self.unexpected:,} "
            "(against the source stream)",
        ]
