"""End-to-end latency: put -> row visible in a foreachBatch sink, where the time goes, Spark's own floor, idle cost.

Run: ``.venv/bin/python -m bench.latency [--rate 200] [--seconds 30] [--idle-seconds 60] [--trigger-ms 200]
[--low-trigger-ms 200] [--lead-in-seconds 0] [--plot bench/results/latency.png] [--no-quotas]``.

By default a phase measures from its first put, which follows ~3 s without records (the warm-up batch): the shards
are idle then, each probed once per ``kinesis.probeIntervalMs`` at its turn, and the first records wait for the
first turn that finds them (up to half of 1 s with the defaults on 2 shards; the p99 of 6,000 records is the worst
60, 0.3 s of puts). ``--lead-in-seconds 2`` puts records that long before measuring: the steady stream's latency.

A producer thread puts ``--rate`` records/s (JSON carrying the time of the put) into a 2-shard kinesalite
stream, in 10 calls a second at random moments (``produce``). In one run, one after another on one SparkSession
(each phase ``--seconds`` long):
- ours, default options: ``aws-kinesis`` with a processingTime trigger of ``--trigger-ms`` into ``foreachBatch``,
  which stamps each row when its batch's ``collect()`` returns;
- ours, low-latency options: the same query with the options docs/source.md recommends for latency (a
  ``--low-trigger-ms`` trigger);
- during both, the baseline: a hand-written boto3 consumer of the twin stream, one thread per shard, GetRecords
  every 200 ms;
- Spark's floor: a trivial Python streaming source (``InstantReader``) whose ``latestOffset`` always has new
  data and whose ``read`` returns at once the synthetic records "put" at ``--rate``/s up to that offset's time:
  the latency no Python source can beat with this trigger on this machine (same sink, same batch machinery).
For each phase the breakdown of one record's latency (means over the records of the phase) comes from the
query progress (``durationMs``) and the sink's own clock: waiting for the trigger that takes it, the source's
``latestOffset`` (our probe and planning), Spark's offset-log write and planning, the job (task scheduling,
Python worker, the read), the rest of the sink; ``commitOffsets`` (Spark's commit log) follows the sink and only
delays the next trigger. The phases run in the order warm-up, floor, ours (default trigger), floor, ours
(low-latency): the machine's load at the time touches each pair alike. Then the number of micro-batches during
``--idle-seconds`` without new records (target 0). Nothing here is asserted. The percentiles are drawn into
``--plot`` (matplotlib; "" for none). By default the readers (ours and the baseline) meet AWS's Kinesis quotas
(``bench.common``); the baseline reads a twin stream the producer fills with the same records at the same
moments (two readers calling every 200 ms would share a shard's 5 GetRecords/s and measure each other's
refusals), and a refused baseline call waits 0.5 s; the producer writes to the server directly.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from bench.common import add_quota_flag, delivered_rows, fetched_per_delivered, local_aws, print_quotas, spark_session
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY, KINESALITE
from localaws.streams import create_stream, list_shard_ids, patiently, unique_name

SHARDS = 2
PLOT = Path(__file__).resolve().parent / "results" / "latency.png"
FETCH_INTERVAL_S = 0.2
# docs/source.md's low-latency recipe, as a user pastes it (with a trigger of --low-trigger-ms: 200 ms, the pace of a
# shard's 5 GetRecords a second; a shorter trigger cannot ask a shard more often, and measured no faster)
LOW_LATENCY_OPTIONS = {
    "kinesis.probeIntervalMs": "200",
    "kinesis.describeShardInterval": "10s",
}


# --- Spark's floor: a source that knows at once which records exist and reads them instantly --------------------


@dataclass(frozen=True)
class InstantPartition(InputPartition):
    after_ms: float
    until_ms: float
    rate: int


class InstantReader(DataSourceStreamReader):
    """Every ``latestOffset`` is now: the records "put" every 1/rate s since the last offset are the batch."""

    def __init__(self, options: dict[str, str]):
        self.rate = int(options.get("rate", "200"))

    def initialOffset(self) -> dict:
        return {"ms": time.time() * 1000}

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        return {"ms": time.time() * 1000}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [InstantPartition(start["ms"], end["ms"], self.rate)]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        assert isinstance(partition, InstantPartition)
        step = 1000 / partition.rate
        first = (partition.after_ms // step + 1) * step
        count = max(0, int((partition.until_ms - first) // step) + 1)
        for index in range(count):
            yield (json.dumps({"t": first + index * step}).encode(),)

    def commit(self, end: dict) -> None:
        pass


class InstantSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "bench-instant"

    def schema(self) -> str:
        return "data BINARY"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return InstantReader(self.options)


# --- the producer and the boto3 baseline --------------------------------------------------------------------


def produce(
    kinesis: Any, streams: list[str], rate: int, seconds: float, sent: list[int], phases: random.Random | None = None
) -> None:
    """``rate`` records/s into each of ``streams``, in 10 PutRecords calls per second each, each call at a random
    moment of its tenth of a second; every record carries the time of its own put (ms).

    Why random: the records of one call arrive together. Calls every 100 ms on the dot keep one phase to the
    trigger's 200 ms grid for a whole run, and that phase alone moved the p50 by up to ±50 ms between runs (the
    floor's records are spread evenly)."""
    per_call = max(1, rate // 10)
    phases = phases or random.Random()
    started = time.monotonic()
    time.sleep(phases.uniform(0.0, 0.1))
    tick = 0
    while time.monotonic() - started < seconds:
        for stream in streams:
            now_ms = time.time() * 1000
            records = [
                {"Data": json.dumps({"t": now_ms, "n": len(sent) + i}).encode(), "PartitionKey": f"k{len(sent) + i}"}
                for i in range(per_call)
            ]
            assert kinesis.put_records(StreamName=stream, Records=records)["FailedRecordCount"] == 0
        sent.extend(range(per_call))
        tick += 1
        time.sleep(max(0.0, started + (tick + phases.uniform(0.0, 1.0)) * 0.1 - time.monotonic()))


def boto3_consumer(kinesis: Any, stream: str, shard_id: str, latencies: list[float], stop: threading.Event) -> None:
    iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard_id, ShardIteratorType="LATEST")[
        "ShardIterator"
    ]
    while not stop.is_set():
        answer = patiently(kinesis.get_records, ShardIterator=iterator)
        seen_ms = time.time() * 1000
        bodies = [json.loads(record["Data"]) for record in answer["Records"]]
        latencies.extend(seen_ms - body["t"] for body in bodies if "warm" not in body)
        iterator = answer["NextShardIterator"]
        time.sleep(FETCH_INTERVAL_S)


# --- measuring a query --------------------------------------------------------------------------------------


@dataclass
class SinkBatch:
    batch_id: int
    called_ms: float  # foreachBatch entered
    seen_ms: float  # collect() returned: the rows' stamp
    puts_ms: list[float]


@dataclass
class Phase:
    name: str
    latencies: list[float] = field(default_factory=list)
    batches: list[SinkBatch] = field(default_factory=list)
    progress: dict[int, dict] = field(default_factory=dict)  # batch id -> query progress
    measuring: bool = False
    calls: int = 0  # foreachBatch calls, measured or not
    fetched: str = ""  # records fetched per record delivered (bench.common.fetched_per_delivered)

    def sink(self, frame: Any, batch_id: int) -> None:
        self.calls += 1
        called = time.time() * 1000
        rows = frame.select("data").collect()
        seen = time.time() * 1000
        puts = [body["t"] for body in (json.loads(bytes(row.data)) for row in rows) if "warm" not in body]
        if self.measuring:
            self.latencies.extend(seen - put for put in puts)
            self.batches.append(SinkBatch(batch_id, called, seen, puts))

    def keep_progress(self, query: Any) -> None:
        for progress in query.recentProgress:
            self.progress[progress["batchId"]] = progress


def slowest_put_at(phase: Phase, share: float = 0.01) -> str:
    """When the slowest ``share`` of the phase's records were put, in seconds after its first put: the first records
    after an idle spell wait for an idle shard's probe, records later on for a busy shard's."""
    timed = sorted((batch.seen_ms - put, put) for batch in phase.batches for put in batch.puts_ms)
    if not timed:
        return f"{phase.name}: no records"
    first = min(put for _, put in timed)
    slowest = timed[-max(1, round(len(timed) * share)) :]
    offsets = sorted((put - first) / 1000 for _, put in slowest)
    early = sum(offset < 1.0 for offset in offsets)
    return (
        f"{phase.name}: the slowest {len(slowest)} ({slowest[0][0]:.0f}-{slowest[-1][0]:.0f} ms) were put "
        f"{offsets[0]:.1f}-{offsets[-1]:.1f} s into the phase, {early} of them in its first second"
    )


def epoch_ms(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000


BREAKDOWN = (
    ("wait for the trigger that takes it", "wait"),
    ("source latestOffset (probe + planning)", "latestOffset"),
    ("Spark: offset log + planning + getBatch", "spark"),
    ("job: tasks, Python worker, read", "job"),
    ("rest of the sink + measuring error", "rest"),
    ("= put -> row, mean", "total"),
    ("after the sink: commitOffsets (next trigger waits)", "commitOffsets"),
    ("micro-batches with rows", "batches"),
)


def breakdown(phase: Phase) -> dict[str, float]:
    """Mean ms per record of each part (see BREAKDOWN); batches without progress are left out."""
    parts: dict[str, list[float]] = {key: [] for _label, key in BREAKDOWN}
    for batch in phase.batches:
        progress = phase.progress.get(batch.batch_id)
        if progress is None or not batch.puts_ms:
            continue
        durations = progress["durationMs"]
        started = epoch_ms(progress["timestamp"])
        latest = durations.get("latestOffset", 0)
        spark = sum(durations.get(key, 0) for key in ("walCommit", "queryPlanning", "getBatch"))
        job = batch.seen_ms - batch.called_ms
        rest = batch.seen_ms - started - latest - spark - job
        for put in batch.puts_ms:
            parts["wait"].append(started - put)
            parts["latestOffset"].append(latest)
            parts["spark"].append(spark)
            parts["job"].append(job)
            parts["rest"].append(rest)
            parts["total"].append(batch.seen_ms - put)
            parts["commitOffsets"].append(durations.get("commitOffsets", 0))
        parts["batches"].append(1)
    means = {key: statistics.fmean(values) if values else 0.0 for key, values in parts.items()}
    means["batches"] = len(parts["batches"])
    return means


def run_query(spark: Any, reader: Any, phase: Phase, trigger_ms: int, checkpoint: str) -> Any:
    return (
        reader.load()
        .writeStream.foreachBatch(phase.sink)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=f"{trigger_ms} milliseconds")
        .start()
    )


def kinesis_reader(spark: Any, server: Any, stream: str, options: dict[str, str]) -> Any:
    reader = (
        spark.readStream.format("aws-kinesis")
        .option("kinesis.streamName", stream)
        .option("kinesis.endpointUrl", server.endpoint_url)
        .option("kinesis.awsAccessKeyId", DUMMY_ACCESS_KEY)
        .option("kinesis.awsSecretKey", DUMMY_SECRET_KEY)
        .option("kinesis.startingPosition", "TRIM_HORIZON")
        .option("kinesis.metadataPath", f"/tmp/{stream}/meta")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader


def measure_kinesis(
    spark: Any, server: Any, phase: Phase, options: dict[str, str], trigger_ms: int, args: Any
) -> tuple[list[float], Any, int]:
    """One phase of ours with the boto3 baseline alongside; returns the baseline's latencies and the running
    query (stopped by the caller). The baseline reads a twin stream that gets the same records at the same
    moments: behind the quotas, two readers of one shard each calling every 200 ms would share its 5 calls a
    second and measure each other's refusals, not their latency."""
    kinesis = server.client("kinesis")  # the baseline reads through the quotas, as ours does
    setup = server.direct.client("kinesis")  # the streams and the producer: not what is measured
    stream = create_stream(setup, unique_name("bench-latency"), SHARDS)
    twin = create_stream(setup, unique_name("bench-latency-twin"), SHARDS)
    query = run_query(spark, kinesis_reader(spark, server, stream, options), phase, trigger_ms, f"/tmp/{stream}/cp")
    warm_up_query(setup, stream, phase, query)
    baseline: list[float] = []
    stop = threading.Event()
    consumers = [
        threading.Thread(target=boto3_consumer, args=(kinesis, twin, shard, baseline, stop), daemon=True)
        for shard in list_shard_ids(setup, twin)
    ]
    for consumer in consumers:
        consumer.start()
    time.sleep(0.5)  # the LATEST iterators are open before the first put
    if args.lead_in_seconds > 0:  # puts before measuring: the shards are busy, not idle, when it starts
        produce(setup, [stream, twin], args.rate, args.lead_in_seconds, [])
        time.sleep(1)  # the lead-in's last records reach both consumers
        del baseline[:]
    phase.measuring = True
    sent: list[int] = []
    produce(setup, [stream, twin], args.rate, args.seconds, sent)
    time.sleep(3)  # the last records reach both consumers
    phase.measuring = False
    stop.set()
    phase.keep_progress(query)
    phase.fetched = fetched_per_delivered(server, stream, delivered_rows(query))
    return baseline, query, len(sent)


def warm_up_query(kinesis: Any, stream: str, phase: Phase, query: Any) -> None:
    warm = [
        {"Data": json.dumps({"t": time.time() * 1000, "warm": 1}).encode(), "PartitionKey": f"w{i}"} for i in range(20)
    ]
    kinesis.put_records(StreamName=stream, Records=warm)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (query.lastProgress is None or query.lastProgress["numInputRows"] == 0):
        time.sleep(0.1)
    time.sleep(2)


def measure_floor(spark: Any, phase: Phase, trigger_ms: int, rate: int, seconds: float) -> None:
    checkpoint = f"/tmp/{unique_name('bench-instant')}/cp"
    reader = spark.readStream.format(InstantSource.name()).option("rate", str(rate))
    query = run_query(spark, reader, phase, trigger_ms, checkpoint)
    time.sleep(5)  # its first batches
    phase.measuring = True
    time.sleep(seconds)
    phase.measuring = False
    phase.keep_progress(query)
    query.stop()


# --- output ---------------------------------------------------------------------------------------------------


def percentiles(values: list[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    cut = statistics.quantiles(ordered, n=100)
    return cut[49], cut[98], ordered[-1]


def print_table(rows: list[tuple[str, list[float]]]) -> None:
    print(f"| {'consumer':<56} | {'records':>8} | {'p50 ms':>7} | {'p99 ms':>7} | {'max ms':>7} |")
    print(f"|{'-' * 58}|{'-' * 10}|{'-' * 9}|{'-' * 9}|{'-' * 9}|")
    for name, values in rows:
        p50, p99, worst = percentiles(values)
        print(f"| {name:<56} | {len(values):>8,} | {p50:>7.0f} | {p99:>7.0f} | {worst:>7.0f} |")


def print_breakdown(phases: list[Phase]) -> None:
    means = [breakdown(phase) for phase in phases]
    header = "".join(f" {phase.name[:22]:>22} |" for phase in phases)
    print(f"| {'mean ms per record':<50} |{header}")
    print(f"|{'-' * 52}|" + "".join(f"{'-' * 24}|" for _ in phases))
    for label, key in BREAKDOWN:
        cells = "".join(f" {mean[key]:>22.0f} |" for mean in means)
        print(f"| {label:<50} |{cells}")


def plot(path: str, rows: list[tuple[str, list[float]]], title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [name for name, _values in rows]
    stats = [percentiles(values) for _name, values in rows]
    figure, axes = plt.subplots(figsize=(9, 4.5))
    positions = range(len(rows))
    width = 0.38
    p50 = [stat[0] for stat in stats]
    p99 = [stat[1] for stat in stats]
    axes.barh([p - width / 2 for p in positions], p50, width, label="p50")
    axes.barh([p + width / 2 for p in positions], p99, width, label="p99")
    for position, (low, high) in enumerate(zip(p50, p99, strict=True)):
        axes.text(low, position - width / 2, f" {low:.0f}", va="center", fontsize=8)
        axes.text(high, position + width / 2, f" {high:.0f}", va="center", fontsize=8)
    axes.set_yticks(list(positions), names, fontsize=8)
    axes.invert_yaxis()
    axes.set_xlabel("put -> row latency (ms)")
    axes.set_title(title, fontsize=9)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--idle-seconds", type=float, default=60)
    parser.add_argument("--trigger-ms", type=int, default=200)
    parser.add_argument("--low-trigger-ms", type=int, default=200)
    parser.add_argument(
        "--lead-in-seconds",
        type=float,
        default=0,
        help="put records this long before measuring ours (0: measure from the first put, after an idle spell, "
        "so the first records wait for an idle shard's probe)",
    )
    parser.add_argument("--plot", default=str(PLOT), help="write a PNG of the percentiles here")
    add_quota_flag(parser)
    args = parser.parse_args(argv)
    spark = spark_session()
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "2000")
    spark.dataSource.register(InstantSource)
    default = Phase(f"ours, default, {args.trigger_ms} ms")
    low = Phase(f"ours, low-latency, {args.low_trigger_ms} ms")
    floor_default = Phase(f"empty source, {args.trigger_ms} ms")
    floor = Phase(f"empty source, {args.low_trigger_ms} ms")
    with local_aws(args, KINESALITE) as aws:
        server = aws.kinesalite
        measure_floor(spark, Phase("warm-up"), args.trigger_ms, args.rate, 10)  # JVM and Python workers warm up
        measure_floor(spark, floor_default, args.trigger_ms, args.rate, args.seconds)
        base_default, query, sent = measure_kinesis(spark, server, default, {}, args.trigger_ms, args)
        query.stop()
        measure_floor(spark, floor, args.low_trigger_ms, args.rate, args.seconds)
        base_low, query, sent_low = measure_kinesis(spark, server, low, LOW_LATENCY_OPTIONS, args.low_trigger_ms, args)
        calls = low.calls
        time.sleep(args.idle_seconds)
        idle_batches = low.calls - calls
        query.stop()
    spark.stop()
    low_options = ", ".join(f"{key}={value}" for key, value in LOW_LATENCY_OPTIONS.items())
    print(f"{sent:,} then {sent_low:,} records at {args.rate}/s for {args.seconds:.0f} s each into {SHARDS} kinesalite")
    print(f"shards, local[2]; default options with processingTime {args.trigger_ms} ms; low-latency: processingTime")
    print(f"{args.low_trigger_ms} ms + {low_options}; Spark's floor: an empty Python source")
    print(f"answering {args.rate} synthetic records/s at once, same triggers. Phases run one after another.\n")
    rows = [
        ("boto3 GetRecords loop, 200 ms (during ours, default)", base_default),
        (f"aws-kinesis, default options, trigger {args.trigger_ms} ms", default.latencies),
        (f"empty Python source (Spark's floor), trigger {args.trigger_ms} ms", floor_default.latencies),
        ("boto3 GetRecords loop, 200 ms (during ours, low-latency)", base_low),
        (f"aws-kinesis, low-latency options, trigger {args.low_trigger_ms} ms", low.latencies),
        (f"empty Python source (Spark's floor), trigger {args.low_trigger_ms} ms", floor.latencies),
    ]
    print_table(rows)
    for ours, baseline, empty in ((rows[1], rows[0], rows[2]), (rows[4], rows[3], rows[5])):
        (ours_p50, ours_p99, _), (base_p50, base_p99, _) = percentiles(ours[1]), percentiles(baseline[1])
        (floor_p50, floor_p99, _) = percentiles(empty[1])
        print(
            f"{ours[0]}: p50 {ours_p50 / base_p50:.2f}x / p99 {ours_p99 / base_p99:.2f}x the boto3 loop, "
            f"p50 {ours_p50 / floor_p50:.2f}x / p99 {ours_p99 / floor_p99:.2f}x Spark's floor"
        )
    for phase in (default, low):
        print(slowest_put_at(phase))
        print(f"{phase.name}: {phase.fetched}")
    print()
    print_breakdown([default, floor_default, low, floor])
    print(f"\nidle {args.idle_seconds:.0f} s (low-latency options): {idle_batches} micro-batches ran")
    if args.plot:
        plot(args.plot, rows, f"put -> row at {args.rate} records/s, 2 kinesalite shards, local[2] (one run)")
        print(f"plot: {args.plot}")
    print_quotas(aws)


if __name__ == "__main__":
    main()
