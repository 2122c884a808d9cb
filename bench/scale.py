"""Driver planning time per trigger from 1 to 10,000 shards, the AWS calls it makes, against a naive boto3 plan.

Run: ``.venv/bin/python -m bench.scale [--shards 1,16,256,1000,4000,10000] [--server-max 256] [--rounds N]
[--plot bench/results/scale.png] [--no-quotas]``; ``--profile-calls`` instead prints where one probe call's time goes
(cProfile of GetRecords through the stand-in). On kinesalite, ours and the baseline meet AWS's Kinesis quotas by
default (``bench.common``); the stand-in has none.

Two servers answer, each row says which:
- *kinesalite* (a real server on 127.0.0.1) for counts up to ``--server-max``: its GetRecords reads the whole
  stream description each call, ~5 ms at 1,000 shards and growing with the count, so beyond a few hundred shards
  it measures kinesalite, not the planner;
- *stand-in*: a botocore ``before-send`` hook answers every Kinesis call in-process (ListShards in pages of
  1,000 shards with NextToken as AWS does, GetShardIterator, GetRecords over records kept per shard), in the
  shapes recorded from kinesalite at start-up. botocore still builds, signs and parses every call: this is the
  planner's own cost, without the network and a server's time.

For each count, a round puts one record per shard and then, for ours (``KinesisStreamReader.latestOffset``, the
driver's whole job per trigger, default options) and for ours asking every shard each trigger
(``kinesis.maxProbesPerTrigger`` unbounded, the behaviour before that option):
- *busy*: the triggers that plan a batch until every shard's record is read (reads by ``read``, not timed);
- *idle*: the trigger right after (positions moved: each shard's probe starts with the iterator its read handed on,
  ``ShardRead.next_iterator``, so no GetShardIterator);
- *steady idle*: a later trigger (probes reuse iterators).
Baseline, in the same run: a hand-written driver learning the same with plain boto3 calls one after the other
(ListShards, then GetShardIterator + GetRecords(Limit=1) per shard). Printed: median ms, the ratio baseline /
ours, triggers per round, Kinesis calls by kind per busy trigger, per busy trigger's reads and per idle trigger
(ours), and the offset Spark writes to its checkpoint
every batch (JSON size; ms to parse it and write it back, as each trigger does). On the stand-in also the floor of an
idle trigger: as many bare GetRecords(Limit=1) through the query's reader client, one after another, as ours made
per idle trigger (botocore's cost of those calls alone; ours adds its planning to it). Nothing here is asserted.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.common import add_quota_flag, local_aws, options, print_quotas
from bench.standin import NOWHERE, StandIn
from localaws.servers import KINESALITE
from localaws.streams import create_stream, unique_name
from pyspark_aws_kinesis.aws.clients import kinesis_client, kinesis_reader_client
from pyspark_aws_kinesis.shards import list_shards
from pyspark_aws_kinesis.source.offsets import parse_offset
from pyspark_aws_kinesis.source.stream_reader import KinesisStreamReader

VARIANTS = {"ours": {}, "ask all": {"kinesis.maxprobespertrigger": "1000000"}}


# --- measuring ----------------------------------------------------------------------------------------------------


@dataclass
class Calls:
    """Kinesis calls by kind, counted on the process's clients (``before-call``)."""

    counts: Counter = field(default_factory=Counter)
    hooked: set[int] = field(default_factory=set)

    def hook(self, client: Any) -> None:
        if id(client) not in self.hooked:
            self.hooked.add(id(client))
            client.meta.events.register("before-call.kinesis", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        self.counts[model.name] += 1


def naive_plan(kinesis: Any, stream: str) -> int:
    """The baseline driver: list the shards, then ask each one, in turn, whether it has a record."""
    waiting = 0
    for shard in list_shards(kinesis, stream):
        iterator = kinesis.get_shard_iterator(
            StreamName=stream, ShardId=shard.shard_id, ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        waiting += bool(kinesis.get_records(ShardIterator=iterator, Limit=1)["Records"])
    return waiting


def timed_ms(run) -> tuple[float, Any]:
    started = time.perf_counter()
    value = run()
    return (time.perf_counter() - started) * 1000, value


@dataclass
class Server:
    """Where a row's answers come from: kinesalite, or the stand-in (``standin`` set)."""

    name: str
    endpoint: Any
    kinesis: Any  # the baseline's client
    standin: StandIn | None = None
    setup: Any = None  # creating, putting, deleting: not what is measured (default: ``kinesis``)

    def create(self, count: int) -> str:
        stream = unique_name("bench-scale")
        if self.standin is None:
            return create_stream(self.setup or self.kinesis, stream, count)
        self.standin.create(stream, count)
        return stream

    def put_one_per_shard(self, stream: str, tag: str) -> None:
        if self.standin is not None:
            return self.standin.put_one_per_shard(stream, tag)
        setup = self.setup or self.kinesis
        shards = list_shards(setup, stream)
        entries = [
            {"Data": tag.encode(), "PartitionKey": "k", "ExplicitHashKey": str(s.starting_hash_key)} for s in shards
        ]
        for start in range(0, len(entries), 500):
            answer = setup.put_records(StreamName=stream, Records=entries[start : start + 500])
            assert answer["FailedRecordCount"] == 0

    def delete(self, stream: str) -> None:
        if self.standin is None:
            (self.setup or self.kinesis).delete_stream(StreamName=stream)


@dataclass
class Samples:
    busy: list[float] = field(default_factory=list)
    idle: list[float] = field(default_factory=list)
    steady: list[float] = field(default_factory=list)
    triggers: list[int] = field(default_factory=list)  # busy triggers per round
    calls: Counter = field(default_factory=Counter)  # over all busy triggers
    read_calls: Counter = field(default_factory=Counter)  # over all busy triggers' reads
    idle_calls: Counter = field(default_factory=Counter)  # over all idle triggers


def one_round(reader: KinesisStreamReader, start: dict, count: int, calls: Calls, samples: Samples) -> dict:
    """Trigger until every shard's record is read (each trigger timed), then an idle and a steady idle trigger."""
    rows = triggers = 0
    while rows < count:
        assert triggers < count // 100 + 20, f"{rows} of {count} records read after {triggers} triggers"
        before = Counter(calls.counts)
        busy_ms, end = timed_ms(lambda s=start: reader.latestOffset(s, None))
        samples.calls += calls.counts - before
        samples.busy.append(busy_ms)
        triggers += 1
        before = Counter(calls.counts)
        rows += sum(batch.num_rows for p in reader.partitions(start, end) for batch in reader.read(p))
        samples.read_calls += calls.counts - before
        reader.commit(end)
        start = end
        time.sleep(0.25)  # past the probe interval
    samples.triggers.append(triggers)
    assert rows == count, rows
    time.sleep(0.25)
    before = Counter(calls.counts)
    idle_ms, same = timed_ms(lambda s=start: reader.latestOffset(s, None))
    samples.idle_calls += calls.counts - before
    time.sleep(0.25)
    steady_ms, same = timed_ms(lambda s=start: reader.latestOffset(s, None))
    assert same == start
    samples.idle.append(idle_ms)
    samples.steady.append(steady_ms)
    return start


def measure(server: Server, stream: str, count: int, rounds: int) -> tuple[dict[str, Samples], list[float], dict]:
    """Per variant its samples, the baseline's ms, and the last offset (for the checkpoint measures)."""
    samples = {name: Samples() for name in VARIANTS}
    baseline: list[float] = []
    calls = Calls()
    with tempfile.TemporaryDirectory() as metadata:
        readers, starts = {}, {}
        for name, extra in VARIANTS.items():
            opts = options(server.endpoint, stream, f"{metadata}/{name}") | {"kinesis.shardsperpartition": "16"}
            readers[name] = KinesisStreamReader(None, opts | extra)  # type: ignore[arg-type]
            for client in (
                kinesis_client(readers[name].settings.client),
                kinesis_reader_client(readers[name].settings.client),
            ):
                if server.standin is not None:
                    server.standin.hook(client)
                calls.hook(client)
            starts[name] = readers[name].initialOffset()
        plain = kinesis_client(readers["ours"].settings.client) if server.standin else server.kinesis
        for round_ in range(rounds + 1):  # round 0 warms up (first listing, threads, clients)
            server.put_one_per_shard(stream, f"r{round_}")
            time.sleep(0.25)
            for name, reader in readers.items():
                kept = Samples()
                starts[name] = one_round(reader, starts[name], count, calls, kept if round_ == 0 else samples[name])
            baseline_ms, _ = timed_ms(lambda: naive_plan(plain, stream))
            if round_:
                baseline.append(baseline_ms)
    return samples, baseline, starts["ours"]


def checkpoint_measures(offset: dict) -> tuple[float, float]:
    """The offset Spark writes each batch: its JSON size (KB), and ms to parse it and write it back."""
    text = json.dumps(offset)
    parse_ms, parsed = timed_ms(lambda: parse_offset(text))
    write_ms, _ = timed_ms(lambda: json.loads(parsed.to_json()))
    return len(text) / 1000, parse_ms + write_ms


COLUMNS = [
    "server",
    "shards",
    "baseline ms",
    "busy ms",
    "ratio",
    "triggers",
    "idle ms",
    "ratio",
    "steady ms",
    "ratio",
    "ask-all busy ms",
    "ask-all idle ms",
    "calls per busy trigger",
    "its reads' calls",
    "calls per idle trigger",
    "offset KB",
    "offset ms",
    "offset B/shard",
    "idle floor ms",
]


def row(
    server: str, count: int, samples: dict[str, Samples], baseline: list[float], offset: dict, floor_ms: float | None
) -> list[str]:
    base = statistics.median(baseline)
    ours, every = samples["ours"], samples["ask all"]
    median = statistics.median
    triggers = sum(ours.triggers)
    size_kb, offset_ms = checkpoint_measures(offset)
    cells = [server, f"{count}", f"{base:.0f}", f"{median(ours.busy):.0f}", f"{base / median(ours.busy):.2f}"]
    cells += [f"{median(ours.triggers):.0f}", f"{median(ours.idle):.0f}", f"{base / median(ours.idle):.2f}"]
    cells += [f"{median(ours.steady):.0f}", f"{base / median(ours.steady):.2f}"]
    cells += [f"{median(every.busy):.0f}", f"{median(every.idle):.0f}", per_call(ours.calls, triggers)]
    cells += [per_call(ours.read_calls, triggers), per_call(ours.idle_calls, len(ours.idle))]
    cells += [f"{size_kb:.0f}", f"{offset_ms:.0f}", f"{size_kb * 1000 / count:.0f}"]  # offset: KB, ms, B a shard
    return [*cells, "-" if floor_ms is None else f"{floor_ms:.0f}"]


def idle_floor_ms(server: Server, stream: str, samples: Samples, rounds: int) -> float | None:
    """The stand-in's floor of an idle trigger: the median over ``rounds`` of as many bare GetRecords(Limit=1),
    one after another, as ours made per idle trigger, each on an iterator opened beforehand (not timed)."""
    if server.standin is None or not samples.idle:
        return None
    calls = round(samples.idle_calls["GetRecords"] / len(samples.idle))
    settings = KinesisStreamReader(None, options(NOWHERE, stream, "unused")).settings  # type: ignore[arg-type]
    reader, plain = kinesis_reader_client(settings.client), kinesis_client(settings.client)
    server.standin.hook(reader)
    server.standin.hook(plain)
    shards = [shard.shard_id for shard in list_shards(plain, stream)][:calls]
    iterators = [
        reader.get_shard_iterator(StreamName=stream, ShardId=shard, ShardIteratorType="LATEST")["ShardIterator"]
        for shard in shards
    ]
    timings = [
        timed_ms(lambda: [reader.get_records(ShardIterator=iterator, Limit=1) for iterator in iterators])[0]
        for _ in range(rounds)
    ]
    return statistics.median(timings)


def per_call(counts: Counter, triggers: int) -> str:
    """Calls by kind per trigger, e.g. ``GetRecords 1000, ListShards 1``."""
    per_trigger = {kind: n / triggers for kind, n in sorted(counts.items())}
    return ", ".join(f"{kind} {n:.0f}" if n >= 10 else f"{kind} {n:.2g}" for kind, n in per_trigger.items()) or "none"


def plot(path: str, table: list[list[str]]) -> None:
    """Planning time against shard count (log-log), ours and asking every shard, stand-in rows only."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stand_in = [cells for cells in table if cells[0] == "stand-in"]
    shards = [int(cells[1]) for cells in stand_in]
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for column, label in ((3, "ours, busy"), (6, "ours, idle"), (10, "asking every shard, busy"), (2, "baseline")):
        axes.plot(shards, [float(cells[column]) / 1000 for cells in stand_in], marker="o", label=label)
    axes.plot(shards, [n / 1000 for n in shards], linestyle=":", color="grey", label="1 ms per shard (linear)")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("shards")
    axes.set_ylabel("planning time per trigger (s)")
    axes.set_title("Driver planning per trigger (stand-in: botocore answered in-process)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def profile_calls(standin: StandIn, calls: int = 1000) -> None:
    """Where one probe's time goes: cProfile of ``calls`` GetRecords(Limit=1) through the stand-in on one thread,
    after the CPU per call of the reader client's direct path and of botocore's own ``get_records`` beside it."""
    import cProfile
    import pstats

    standin.create("profiled", 1)
    settings = KinesisStreamReader(None, options(NOWHERE, "profiled", "unused")).settings  # type: ignore[arg-type]
    kinesis = kinesis_reader_client(settings.client)
    standin.hook(kinesis)
    iterator = kinesis.get_shard_iterator(
        StreamName="profiled", ShardId="shardId-000000000000", ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    paths = {"direct (ours)": kinesis.get_records, "botocore": functools.partial(type(kinesis).get_records, kinesis)}
    for name, get_records in paths.items():
        cpu = time.process_time()
        for _ in range(calls):
            get_records(ShardIterator=iterator, Limit=1)
        print(f"{name}: {(time.process_time() - cpu) * 1000 / calls:.2f} ms of CPU per GetRecords (no profiler)")
    profiler = cProfile.Profile()
    profiler.runcall(lambda: [kinesis.get_records(ShardIterator=iterator, Limit=1) for _ in range(calls)])
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", default="1,16,256,1000,4000,10000")
    parser.add_argument("--server-max", type=int, default=256, help="largest count also run on kinesalite")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--plot", default="", help="write a PNG of planning time against shard count here")
    parser.add_argument("--profile-calls", action="store_true", help="only profile one probe call, then stop")
    add_quota_flag(parser)
    args = parser.parse_args(argv)
    counts = [int(value) for value in args.shards.split(",")]
    table: list[list[str]] = []
    with local_aws(args, KINESALITE) as aws:
        setup = aws.kinesalite.direct.client("kinesis")
        servers = [
            Server("kinesalite", aws.kinesalite, aws.kinesalite.client("kinesis"), setup=setup),
            Server("stand-in", NOWHERE, None),
        ]
        servers[1].standin = StandIn.recorded(setup)
        if args.profile_calls:
            return profile_calls(servers[1].standin)
        print(
            f"median of {args.rounds} rounds; one record per shard per round; kinesalite on 127.0.0.1, and the stand-in"
        )
        print("(botocore answered in-process: the planner's own cost). ratio = baseline / ours; ask-all = ours with")
        print("kinesis.maxProbesPerTrigger unbounded; offset = the JSON Spark checkpoints each batch")
        print("| " + " | ".join(COLUMNS) + " |")
        print("|" + "|".join("-" * (len(name) + 2) for name in COLUMNS) + "|")
        for count in counts:
            for server in servers:
                if server.standin is None and count > args.server_max:
                    continue
                stream = server.create(count)
                samples, baseline, offset = measure(server, stream, count, args.rounds)
                floor_ms = idle_floor_ms(server, stream, samples["ours"], args.rounds)
                table.append(row(server.name, count, samples, baseline, offset, floor_ms))
                print("| " + " | ".join(table[-1]) + " |", flush=True)
                server.delete(stream)
    print_quotas(aws)
    if args.plot:
        plot(args.plot, table)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
