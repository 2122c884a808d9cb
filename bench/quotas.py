"""Sharing the shard: our query's per-shard read rate against the 2 MiB/s limit, and a neighbour's refusals, in one run.

Run: ``.venv/bin/python -m bench.quotas [--shards N] [--mib-per-shard MIB] [--record-kib KIB] [--busy-s S] [--skip-busy]
[--efo [--efo-mib-per-shard MIB] [--efo-record-kib KIB] [--efo-rounds N]]``
(always behind ``localaws.quota_proxy`` with AWS's limits: the quotas are what is measured, so ``run_all`` never
passes ``--no-quotas`` here). About 8 minutes on the 2-core machine with the defaults (phase 4: 6).

Two phases, one Spark streaming query each, the connector's default options and the default trigger, into noop:
1. **Alone on a backlog**: a stream preloaded (directly) with ``--mib-per-shard`` per shard; the query reads it from
   TRIM_HORIZON. Per shard: the bytes a second it read while reading (the whole seconds between the first and the
   last second that moved a tenth of the limit, as the proxy counted them; the series is printed too), the best
   second, both as a share of the 2 MiB/s line, and its calls and refused calls (the issue's bars: at least 90 % of
   2 MiB/s, at most 2 % of calls refused). ``--backlog-only`` runs this phase alone.
2. **Beside a neighbour**: a second stream, a reader polling each shard once a second (``localaws.neighbour``, as
   AWS Lambda does) and the query: first idle (``--idle-s``), then a producer writing ``--busy-mib-per-shard``
   (0.1 MiB/s per shard by default, 4 KiB records, directly) for ``--busy-s``. Printed: the neighbour's refused
   calls (the issue's bar: at most 1 %), ours, and our GetRecords per shard per second while idle (the bar: at most
   1). With ``--busy-mib-per-shard 1`` (half the read limit) both readers together take the whole 2 MiB/s, and the
   proxy refuses any call while a shard has not paid back its earlier answers: refusals then come from bytes.
3. **Enhanced fan-out on a backlog** (``--efo``, alone: kinesis-mock instead of kinesalite): a stream preloaded
   (directly) with ``--efo-mib-per-shard`` of ``--efo-record-kib`` records per shard (large records: kinesis-mock
   manages ~120-2,600 records a second, so bytes, not records, are what is measured), read from TRIM_HORIZON to
   the tip, all shards at once, in ``--efo-rounds`` rounds of three readers, each with a fresh consumer (so
   kinesis-mock builds its events anew), one after the other in an order that rotates from round to round (the
   machine's and kinesis-mock's drift falls on each alike): kinesis-mock alone (the ceiling: its event stream read
   straight from the server, no proxy, split into messages, records counted in the bytes, nothing decoded), a
   baseline (botocore's own ``subscribe_to_shard`` loop, one thread per shard, behind the proxy, which pushes at
   most 2 MiB/s per consumer and shard, and a fault proxy adding the initial response botocore needs) and ours
   (the connector's range reader through its subscription broker, the path a task takes, without Spark; the broker
   started and its client made before, by a one-record read of another stream, as after a query's first batch).
   Per round, reader and shard: MiB/s from the first SubscribeToShard to the event at the tip after the last
   record (kinesis-mock may push a whole backlog in one event; the proxy then holds the next event until the
   bytes are paid back at 2 MiB/s, so the tip event marks the end), against the 2 MiB/s line, and the CPU seconds
   kinesis-mock's process spent meanwhile; then each reader's median, ours / the baseline per round, and the
   SubscribeToShard calls and refusals of each.
4. **Busy beside a neighbour** (``bench.quotas_busy`` with its defaults, right after phase 2; not with
   ``--efo``): a fresh stream per trigger (the default, 200 ms and 1 s), a neighbour polling each shard once a
   second, and a producer writing 20 s at each of five steady rates from 1 to 1,000 records a second per shard,
   records of 20 B to 100 KiB: per trigger and rate, the neighbour's refused calls (the bar: at most 1 %) and the
   most of ours in any sliding second on a shard (kept: 4). About 6 minutes.
Rates and ratios are printed, never asserted (tests/connector/queries/test_source_share.py asserts the counts).
``--plot`` (matplotlib; "" for none) draws phases 1 and 2 second by second as the proxy counted them: each shard's
read rate against the 2 MiB/s line, and each reader's GetRecords calls per shard against the 5 calls/s line,
refusals marked.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean, median

from botocore.config import Config

from bench import quotas_busy
from bench.common import Server, delivered_rows, fetched_per_delivered, spark_session
from bench.common import options as bench_options
from localaws import LocalAws, aws_client
from localaws.fault_proxy import FaultProxy, Faults
from localaws.neighbour import NEIGHBOUR_TOKEN, Neighbour
from localaws.quota_model import MiB
from localaws.quota_stats import QuotaReport, Tally
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY, KINESALITE, KINESIS_MOCK
from localaws.streams import create_stream, list_shard_ids, put_records, unique_name

GROUPS = {"neighbour": NEIGHBOUR_TOKEN}  # everything else is the query ("other")
LIMIT = 2 * MiB  # GetRecords bytes per second per shard (AWS)
CALLS_LIMIT = 5  # GetRecords calls per second per shard (AWS)
PLOT = Path(__file__).parent / "results" / "quotas.png"
READING = LIMIT / 10  # a second in which a shard's reads moved less did not read the backlog (a probe's record)


@dataclass
class Panel:
    """One phase's per-second series for the plot: a line per label, the quota's line, and the refused calls."""

    title: str
    unit: str
    limit: float
    limit_label: str
    series: dict[str, list[float]] = field(default_factory=dict)
    refused: dict[str, list[int]] = field(default_factory=dict)
    busy_from: float = 0.0  # the panel starts at the first second a series reaches this, less two
    events: dict[str, float] = field(default_factory=dict)  # label -> the proxy's second it happened at


def start_query(spark, server: Server, stream: str, where: str):
    """The docs' example: default options, default trigger, noop sink."""
    return (
        spark.readStream.format("aws-kinesis")
        .option("kinesis.streamName", stream)
        .option("kinesis.endpointUrl", server.endpoint_url)
        .option("kinesis.awsAccessKeyId", DUMMY_ACCESS_KEY)
        .option("kinesis.awsSecretKey", DUMMY_SECRET_KEY)
        .option("kinesis.metadataPath", os.path.join(where, "meta"))
        .option("kinesis.startingPosition", "TRIM_HORIZON")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", os.path.join(where, "checkpoint"))
        .start()
    )


def ours(report: QuotaReport, stream: str, **filters: str) -> Tally:
    return report.tally(stream=stream, client="other", action="GetRecords", **filters)


def wait_until(condition, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def read_rates(report: QuotaReport, stream: str, shard: str) -> tuple[float, float, int, int]:
    """(mean bytes/s while reading, best second's bytes, calls, refused) of our reads of one shard: the mean over the
    whole seconds between the first and the last that moved at least ``READING`` (before them Spark starts the
    query and a probe reads one record; they themselves are partly spent before and after the read)."""
    series = [
        tally.bytes for tally in report.per_second(stream=stream, client="other", action="GetRecords", shard=shard)
    ]
    busy = [second for second, moved in enumerate(series) if moved >= READING]
    if not busy:
        return 0.0, 0.0, 0, 0
    span = series[busy[0] : busy[-1] + 1]
    if len(span) > 2:  # the first and last seconds are partly spent before and after the read
        span = span[1:-1]
    total = ours(report, stream, shard=shard)
    return sum(span) / len(span), max(span), total.calls, total.refused


def backlog_phase(spark, server: Server, args: argparse.Namespace, where: str) -> tuple[list[str], Panel]:
    size = args.record_kib * 1024
    records = args.shards * args.mib_per_shard * MiB // size
    setup = server.direct.client("kinesis")
    stream = create_stream(setup, unique_name("bench-quotas"), args.shards)
    payload, per_call = os.urandom(size), max(1, 4 * MiB // size)  # PutRecords takes at most 5 MiB a call
    for first in range(0, records, per_call):
        put_records(setup, stream, [(payload, f"key-{i}") for i in range(first, min(records, first + per_call))])
    query = start_query(spark, server, stream, os.path.join(where, "backlog"))
    proxy = server.quota_proxy
    done = wait_until(lambda: delivered_rows(query) >= records, 60)
    delivered = delivered_rows(query)
    query.stop()
    report = proxy.report(groups=GROUPS)
    lines = [
        f"1. alone on a backlog: {args.shards} shards x {args.mib_per_shard} MiB ({args.record_kib} KiB records)"
        + ("" if done else " -- NOT read to the end within 60 s"),
        fetched_per_delivered(server, stream, delivered),
        f"{'shard':<24}{'MiB/s reading':>14}{'of 2 MiB/s':>12}{'best second':>13}{'of 2 MiB/s':>12}{'calls':>7}"
        f"{'refused':>9}",
    ]
    for shard in sorted(report.by("shard", stream=stream, client="other", action="GetRecords")):
        mean, best, calls, refused = read_rates(report, stream, shard)
        lines.append(
            f"{shard:<24}{mean / MiB:>14.2f}{mean / LIMIT:>12.0%}{best / MiB:>13.2f}{best / LIMIT:>12.0%}{calls:>7}"
            f"{refused:>9} ({refused / max(calls, 1):.1%})"
        )
    panel = Panel("1. alone on a backlog, default options", "MiB/s read per shard", LIMIT / MiB, "2 MiB/s per shard")
    panel.busy_from = READING / MiB
    for shard in sorted(report.by("shard", stream=stream, client="other", action="GetRecords")):
        series = report.per_second(stream=stream, client="other", action="GetRecords", shard=shard)
        lines.append(f"  {shard} MiB per second: " + " ".join(f"{tally.bytes / MiB:.2f}" for tally in series))
        panel.series[f"ours, {shard}"] = [tally.bytes / MiB for tally in series]
        panel.refused[f"ours, {shard}"] = [tally.refused for tally in series]
    return lines, panel


def sharing_phase(spark, server: Server, args: argparse.Namespace, where: str) -> tuple[list[str], Panel]:
    stream = create_stream(server.direct.client("kinesis"), unique_name("bench-share"), args.shards)
    proxy = server.quota_proxy
    size = 4 * 1024
    per_tick = max(1, round(args.shards * args.busy_mib_per_shard * MiB / size / 4))  # 4 ticks a second
    with Neighbour(server.endpoint_url, stream) as neighbour:
        query = start_query(spark, server, stream, os.path.join(where, "share"))
        wait_until(lambda: ours(proxy.report(groups=GROUPS), stream).calls >= args.shards, 60)  # first probes
        idle_from = proxy.report(groups=GROUPS)
        time.sleep(args.idle_s)
        idle_to = proxy.report(groups=GROUPS)
        producer = server.direct.client("kinesis")
        written = 0
        for tick in range(int(args.busy_s * 4)):
            put_records(producer, stream, [(os.urandom(size), f"k{tick}-{i}") for i in range(per_tick)])
            written += per_tick
            time.sleep(0.25)
        both = wait_until(lambda: delivered_rows(query) >= written and len(neighbour.read) >= written, 60)
        delivered = delivered_rows(query)
        query.stop()
    report = proxy.report(groups=GROUPS)
    idle_s = idle_to.elapsed_s - idle_from.elapsed_s
    idle_calls = ours(idle_to, stream).calls - ours(idle_from, stream).calls
    theirs, us = report.tally(stream=stream, client="neighbour", action="GetRecords"), ours(report, stream)
    lines = [
        f"2. beside a neighbour polling once a second: {args.shards} shards, idle {args.idle_s:.0f} s, then "
        f"{per_tick * size * 4 / args.shards / MiB:.2f} MiB/s per shard for {args.busy_s:.0f} s"
        + ("" if both else " -- NOT everything read by both within 60 s"),
        f"neighbour: {theirs.refused}/{theirs.calls} GetRecords refused ({theirs.refused_share:.1%}; bar <= 1 %; "
        f"why: {dict(theirs.refusals) or '-'}), {len(neighbour.read):,} of {written:,} records read",
        f"our query: {us.refused}/{us.calls} GetRecords refused ({us.refused_share:.1%}; why: "
        f"{dict(us.refusals) or '-'}), {us.records:,} records read",
        f"our query idle: {idle_calls / args.shards / idle_s:.2f} GetRecords per shard per second (bar <= 1; "
        f"{idle_calls} calls on {args.shards} shards in {idle_s:.1f} s)",
        f"our query busy: {fetched_per_delivered(server, stream, delivered)}",
    ]
    panel = calls_panel(report, stream, "2. beside a neighbour polling once a second, default options")
    panel.events = {"idle from": idle_from.elapsed_s, "producer from": idle_to.elapsed_s}
    return lines, panel


def calls_panel(report: QuotaReport, stream: str, title: str) -> Panel:
    """Each reader's GetRecords calls per second on each shard of ``stream``, and its refused calls."""
    panel = Panel(title, "GetRecords calls/s per shard", CALLS_LIMIT, "5 calls/s per shard, shared")
    for client, name in (("other", "ours"), ("neighbour", "neighbour")):
        for shard in sorted(report.by("shard", stream=stream, client=client, action="GetRecords")):
            series = report.per_second(stream=stream, client=client, action="GetRecords", shard=shard)
            panel.series[f"{name}, {shard}"] = [float(tally.calls) for tally in series]
            panel.refused[f"{name}, {shard}"] = [tally.refused for tally in series]
    return panel


def plot(path: str, panels: list[Panel]) -> None:
    """One subplot per phase: the per-second series from the phase's first busy second, the quota as a dashed
    line, a cross where a second had refused calls."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes_list = plt.subplots(len(panels), 1, figsize=(9, 3.2 * len(panels)), squeeze=False)
    for axes, panel in zip(axes_list[:, 0], panels, strict=True):
        busy = [
            next((i for i, v in enumerate(vs) if v and v >= panel.busy_from), len(vs)) for vs in panel.series.values()
        ]
        start = max(0, min(busy, default=0) - 2)
        for label, values in panel.series.items():
            (line,) = axes.plot(range(len(values) - start), values[start:], label=label, linewidth=1.2)
            refused = [(s - start, values[s]) for s, count in enumerate(panel.refused[label]) if count and s >= start]
            if refused:
                axes.scatter(*zip(*refused, strict=True), marker="x", color=line.get_color(), zorder=3)
        for label, second in panel.events.items():
            axes.axvline(second - start, color="grey", linestyle=":", linewidth=1)
            axes.text(second - start, panel.limit * 1.02, f" {label}", fontsize=7, color="grey")
        axes.axhline(panel.limit, color="black", linestyle="--", linewidth=1, label=panel.limit_label)
        axes.set_title(panel.title, fontsize=9)
        axes.set_ylabel(panel.unit, fontsize=8)
        axes.set_xlabel("seconds (x: a second with refused calls)", fontsize=8)
        axes.set_ylim(0, panel.limit * 1.15)
        axes.legend(fontsize=7, loc="lower right", ncols=2)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def botocore_loop(kinesis, consumer_arn: str, shard: str, records: int) -> float:
    """The baseline: botocore's ``subscribe_to_shard``, iterated until ``records`` records came and then an event
    at the tip (resubscribing after the last ContinuationSequenceNumber if the event stream ends first); the
    seconds from the first call to that event."""
    position, seen, started = {"Type": "TRIM_HORIZON"}, 0, time.monotonic()
    while True:
        answer = kinesis.subscribe_to_shard(ConsumerARN=consumer_arn, ShardId=shard, StartingPosition=position)
        with contextlib.closing(answer["EventStream"]) as events:
            for event in events:
                body = event["SubscribeToShardEvent"]
                seen += len(body["Records"])
                position = {"Type": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": body["ContinuationSequenceNumber"]}
                if seen >= records and not body["Records"] and body["MillisBehindLatest"] == 0:
                    return time.monotonic() - started


def raw_loop(kinesis, consumer_arn: str, shard: str, records: int) -> float:
    """kinesis-mock alone (the ceiling): its event stream read straight from the server (no proxy), split into
    messages and its records counted in the bytes, nothing decoded; the seconds until the event at the tip after
    ``records`` records (one subscription: kinesis-mock does not end them)."""
    from pyspark_aws_kinesis.fetch.fanout.framing import messages
    from pyspark_aws_kinesis.fetch.fanout.subscriber import RAW_EVENT_STREAM, release

    started, seen = time.monotonic(), 0
    start = {"Type": "TRIM_HORIZON"}
    raw = kinesis.subscribe_to_shard(ConsumerARN=consumer_arn, ShardId=shard, StartingPosition=start)[RAW_EVENT_STREAM]
    try:
        for message in messages(raw.read):
            found = message.payload.count(b'"SequenceNumber"')
            seen += found
            if seen >= records and not found and json.loads(message.payload).get("MillisBehindLatest") == 0:
                return time.monotonic() - started
    finally:
        release(raw)
    raise RuntimeError(f"the event stream of {shard} ended after {seen} of {records} records")


def ours_settings(server: Server, stream: str, consumer: str):
    """The source's settings with its default options for enhanced fan-out (one broker secret: one broker)."""
    from pyspark_aws_kinesis.source.settings import SourceSettings

    options = {
        **bench_options(server, stream, f"/tmp/{stream}/meta"),
        "kinesis.consumertype": "SubscribeToShard",
        "kinesis.consumername": consumer,
    }
    options.pop("kinesis.getrecords.fetchintervalms")  # the defaults, as a user has them
    return SourceSettings.from_options(options)


def ours_loop(settings, stream: str, consumer_arn: str, shard: str) -> tuple[int, float]:
    """Ours: the connector's range reader (the task's path, through this host's subscription broker, already
    running) from TRIM_HORIZON to the tip; the rows read and the seconds it took."""
    from pyspark_aws_kinesis.fetch.range import FetchLimits, ShardTask
    from pyspark_aws_kinesis.positions import TRIM_HORIZON, Position

    task = ShardTask(stream, shard, 0, 2**128 - 1, Position(TRIM_HORIZON))
    started = time.monotonic()
    shard_range, transport = settings.shard_reader(task, FetchLimits(), consumer_arn)
    rows = sum(batch.num_rows for batch in shard_range.batches(transport))
    return rows, time.monotonic() - started


EFO_RAW, EFO_BASELINE, EFO_OURS = "kinesis-mock-alone", "bench-botocore", "bench-ours"
EFO_READERS = {
    EFO_RAW: "kinesis-mock alone (no proxy, nothing decoded)",
    EFO_BASELINE: "baseline (botocore's loop)",
    EFO_OURS: "ours (range reader + broker)",
}


def preload_by_shard(setup, stream: str, per_shard: int, size: int) -> float:
    """``per_shard`` records of ``size`` bytes on each shard (routed by hash key), directly; the seconds it took."""
    payload, per_call = os.urandom(size), max(1, min(500, 4 * MiB // size))
    started = time.monotonic()
    for description in setup.list_shards(StreamName=stream)["Shards"]:
        key = description["HashKeyRange"]["StartingHashKey"]
        for first in range(0, per_shard, per_call):
            batch = [
                {"Data": payload, "PartitionKey": f"k{i}", "ExplicitHashKey": key}
                for i in range(first, min(per_shard, first + per_call))
            ]
            setup.put_records(StreamName=stream, Records=batch)
    return time.monotonic() - started


def efo_round(
    server: Server, stream: str, shards: list[str], per_shard: int, number: int, settings
) -> dict[str, list[float]]:
    """One round: each reader with a consumer of its own (so kinesis-mock builds each one's events anew), all shards
    at once, the readers one after the other in an order that rotates with ``number``; the seconds per shard."""
    from pyspark_aws_kinesis.consumers import ensure_consumer
    from pyspark_aws_kinesis.retry import RetryPolicy

    patient = RetryPolicy(max_retries=10, initial_interval_ms=500, max_interval_ms=2000)
    kinesis = server.client("kinesis")
    arns = {name: ensure_consumer(kinesis, stream, f"{name}-{number}", patient).arn for name in EFO_READERS}
    order = list(EFO_READERS)
    order = order[number % len(order) :] + order[: number % len(order)]
    found = {}
    for name in order:
        cpu = server_cpu_s(server)
        found[name] = run_reader(name, server, stream, shards, per_shard, arns[name], settings)
        found[f"{name} cpu"] = [server_cpu_s(server) - cpu]
    return found


def server_cpu_s(server: Server) -> float:
    """The CPU seconds the server's process (kinesis-mock: one Node.js thread does the work) has used so far; 0 where
    /proc is not there."""
    try:
        with open(f"/proc/{server.direct.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def run_reader(
    name: str, server: Server, stream: str, shards: list[str], per_shard: int, arn: str, settings
) -> list[float]:
    """The seconds one reader (``EFO_READERS``) took per shard, all shards at once, one thread each (``settings``:
    ours, with its broker warm)."""
    from pyspark_aws_kinesis.fetch.fanout.subscriber import prepare_client

    config = Config(read_timeout=120, retries={"max_attempts": 10, "mode": "standard"})
    with ThreadPoolExecutor(len(shards)) as pool:
        if name == EFO_RAW:
            raw = prepare_client(aws_client("kinesis", server.direct.endpoint_url, config=config))
            return list(pool.map(lambda shard: raw_loop(raw, arn, shard, per_shard), shards))
        if name == EFO_BASELINE:
            faults = Faults(initial_response=True, actions=frozenset({"SubscribeToShard"}))  # botocore needs it
            with FaultProxy(server.quota_proxy.endpoint_url, faults) as front:
                botocore = aws_client("kinesis", front.endpoint_url, config=config)
                return list(pool.map(lambda shard: botocore_loop(botocore, arn, shard, per_shard), shards))
        read = list(pool.map(lambda shard: ours_loop(settings, stream, arn, shard), shards))
        if [rows for rows, _ in read] != [per_shard] * len(shards):
            raise RuntimeError(f"ours read {[rows for rows, _ in read]} rows, not {per_shard} a shard")
        return [took for _, took in read]


def warm_broker(server: Server):
    """Our settings, with this host's subscription broker running and its client made, as after a query's first
    batch (the baseline's client is made before it is timed, too): one record read from a stream of its own."""
    from pyspark_aws_kinesis.consumers import ensure_consumer
    from pyspark_aws_kinesis.retry import RetryPolicy

    setup = server.direct.client("kinesis")
    stream = create_stream(setup, unique_name("bench-quotas-efo-warm"), 1)
    put_records(setup, stream, [(b"warm", "warm")])
    patient = RetryPolicy(max_retries=10, initial_interval_ms=500, max_interval_ms=2000)
    arn = ensure_consumer(server.client("kinesis"), stream, f"{EFO_OURS}-warm", patient).arn
    settings = ours_settings(server, stream, EFO_OURS)  # one broker secret: one broker for every round
    rows, _ = ours_loop(settings, stream, arn, list_shard_ids(setup, stream)[0])
    assert rows == 1
    return settings


def efo_phase(server: Server, args: argparse.Namespace) -> list[str]:
    size = args.efo_record_kib * 1024
    per_shard = args.efo_mib_per_shard * MiB // size
    setup = server.direct.client("kinesis")
    stream = create_stream(setup, unique_name("bench-quotas-efo"), args.shards)
    shards = list_shard_ids(setup, stream)
    preload_s = preload_by_shard(setup, stream, per_shard, size)
    settings = warm_broker(server)
    rounds = [efo_round(server, stream, shards, per_shard, number, settings) for number in range(args.efo_rounds)]
    shard_mib = per_shard * (size + len("k000")) / MiB
    lines = [
        f"3. enhanced fan-out on a backlog (kinesis-mock): {args.shards} shards x {args.efo_mib_per_shard} MiB "
        f"({args.efo_record_kib} KiB records, {per_shard} a shard; preloaded in {preload_s:.0f} s), all shards at "
        f"once, from the first SubscribeToShard to the event at the tip; {args.efo_rounds} rounds, each reader with a "
        "fresh consumer, the readers' order rotating; behind the proxy, which pushes at most 2 MiB/s per consumer "
        "and shard (an event as a whole)",
        f"{'round':<7}{'reader':<50}"
        + "".join(f"{shard[-4:] + ' MiB/s':>13}" for shard in shards)
        + f"{'of 2 MiB/s':>12}{'kinesis-mock CPU s':>20}",
    ]
    for number, seconds in enumerate(rounds):
        for name, label in EFO_READERS.items():
            rates = [shard_mib / took for took in seconds[name]]
            lines.append(
                f"{number:<7}{label:<50}"
                + "".join(f"{rate:>13.2f}" for rate in rates)
                + f"{mean(rates) / 2:>12.0%}{seconds[f'{name} cpu'][0]:>20.1f}"
            )
    medians = {name: median(shard_mib / took for r in rounds for took in r[name]) for name in EFO_READERS}
    ratios = [mean(r[EFO_BASELINE]) / mean(r[EFO_OURS]) for r in rounds]  # seconds: baseline's / ours = rate ratio
    named = {EFO_READERS[name].split(" (")[0]: rate for name, rate in medians.items()}
    lines.append(
        "median per shard over rounds: "
        + ", ".join(f"{who} {rate:.2f} MiB/s ({rate / 2:.0%})" for who, rate in named.items())
    )
    lines.append(
        f"ours / baseline per round: {' '.join(f'{ratio:.2f}' for ratio in ratios)} (median {median(ratios):.2f}); "
        f"ours / kinesis-mock alone (median rates): {medians[EFO_OURS] / medians[EFO_RAW]:.2f}"
    )
    report = server.quota_proxy.report()
    for name in (EFO_BASELINE, EFO_OURS):
        calls = [
            row.tally
            for row in report.select(stream=stream, action="SubscribeToShard")
            if row.consumer.rsplit("-", 1)[0] == name
        ]
        made, refused = sum(t.calls for t in calls), sum(t.refused for t in calls)
        lines.append(f"{name}: SubscribeToShard {made} calls, {refused} refused")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--mib-per-shard", type=int, default=16, help="backlog per shard in phase 1")
    parser.add_argument("--record-kib", type=int, default=25, help="record size in phase 1")
    parser.add_argument("--idle-s", type=float, default=5.0)
    parser.add_argument("--busy-s", type=float, default=10.0)
    parser.add_argument("--busy-mib-per-shard", type=float, default=0.1, help="producer rate in phase 2")
    parser.add_argument("--backlog-only", action="store_true", help="phase 1 only")
    parser.add_argument("--skip-busy", action="store_true", help="phases 1 and 2 only (phase 4 takes 6 minutes)")
    parser.add_argument("--efo", action="store_true", help="phase 3 alone (enhanced fan-out, kinesis-mock)")
    parser.add_argument("--efo-mib-per-shard", type=int, default=16, help="backlog per shard in phase 3")
    parser.add_argument("--efo-record-kib", type=int, default=64, help="record size in phase 3")
    parser.add_argument("--plot", default=str(PLOT), help="PNG of phases 1 and 2 ('' for none)")
    parser.add_argument("--efo-rounds", type=int, default=3, help="rounds of the three readers in phase 3")
    args = parser.parse_args(argv)
    if args.efo:
        with LocalAws([KINESIS_MOCK], quotas=True) as aws:
            lines = efo_phase(aws.kinesis_mock, args)
            print("kinesis-mock behind the quota proxy (AWS's limits); no Spark: the task's read path")
            print("\n".join(lines))
            print(aws.quota_summary())
        return
    with LocalAws([KINESALITE], quotas=True) as aws, tempfile.TemporaryDirectory() as where:
        server = aws.kinesalite
        spark = spark_session(**{"spark.sql.streaming.numRecentProgressUpdates": "10000"})  # every batch's rows
        lines, panel = backlog_phase(spark, server, args, where)
        panels = [panel]
        if not args.backlog_only:
            more, panel = sharing_phase(spark, server, args, where)
            lines, panels = lines + more, [*panels, panel]
        if not args.backlog_only and not args.skip_busy:
            print("4. busy beside a neighbour (bench.quotas_busy's defaults):", flush=True)
            lines += quotas_busy.busy_phase(spark, aws, quotas_busy.parse_args([]), os.path.join(where, "busy"))
        spark.stop()
        print("kinesalite behind the quota proxy (AWS's limits); Spark local[2]; the connector's default options")
        print("\n".join(lines))
        print(aws.quota_summary())
        if args.plot:
            plot(args.plot, panels)
            print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
