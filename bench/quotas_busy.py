"""A busy shard shared: our query beside neighbours polling every shard once a second, while a producer writes at
steady rates; the neighbours' refusals per rate and trigger, and the most of our calls in any sliding second.

Run: ``.venv/bin/python -m bench.quotas_busy [--triggers default,200ms,1s] [--rates 20x200,1000x20,...]
[--busy-s S] [--neighbours N] [--shards N] [--option key=value ...]``
(kinesalite behind ``localaws.quota_proxy`` with AWS's limits). ``bench.quotas`` runs it as its phase 4.

Per trigger: a fresh stream, ``--neighbours`` readers polling each shard once a second from TRIM_HORIZON (as AWS
Lambda and Firehose do: ``localaws.neighbour``), the connector's default options (plus ``--option``) and the trigger,
into noop; idle ``--idle-s``, then each rate of ``--rates`` (records a second per shard x bytes a record) for
``--busy-s``, one after the other. Counted from the proxy's call log, per trigger and rate: the neighbours'
GetRecords refused (the bar: at most 1 %), ours per shard per second, and the most of ours on one shard in any
sliding second (what AWS counts; the source keeps to ``call_window``'s share). Printed, never asserted
(``tests/connector/queries/test_source_share.py`` asserts).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import dataclass

from bench.common import spark_session
from localaws import LocalAws
from localaws.neighbour import NEIGHBOUR_TOKEN, Neighbour
from localaws.quota_stats import LoggedCall, QuotaReport, most_in_a_second, sliding_windows
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY, KINESALITE
from localaws.streams import create_stream, put_records, unique_name
from pyspark_aws_kinesis.shard_calls import SHARED_CALLS_PER_S

TRIGGERS = {"default": None, "200ms": "200 milliseconds", "1s": "1 second"}
# Records a second per shard x bytes: the small JSON, many tiny, mid-size, few large (at most 0.5 MiB/s a
# shard written, so that the two readers together stay within its 2 MiB/s of reads).
RATES = "20x200,1x20,1000x20,100x1024,5x102400"
TICKS_PER_S = 4
OUR_LIMIT = SHARED_CALLS_PER_S  # the calls a second the source keeps to on a shared shard


def crowded_second(shard: str, ordered: list[LoggedCall], limit: int) -> str:
    """The first sliding second of ``ordered`` (one shard's calls, by time) holding more than ``limit``: their
    offsets in ms from the first, refused ones marked R ("" if none)."""
    for start, end in sliding_windows([call.at_s for call in ordered]):
        if end - start > limit:
            window = ordered[start:end]
            parts = [f"{(c.at_s - window[0].at_s) * 1000:.0f}{'R' if c.refused else ''}" for c in window]
            return f"{shard}: calls at +{', +'.join(parts)} ms"
    return ""


@dataclass
class RateResult:
    trigger: str
    rate: str
    neighbour_calls: int
    neighbour_refused: int
    ours_per_shard_s: float
    ours_most_in_a_second: int
    ours_refused: int
    crowded: str


def start_query(spark, endpoint_url: str, stream: str, where: str, trigger: str | None, extra: dict[str, str]):
    reader = (
        spark.readStream.format("aws-kinesis")
        .option("kinesis.streamName", stream)
        .option("kinesis.endpointUrl", endpoint_url)
        .option("kinesis.awsAccessKeyId", DUMMY_ACCESS_KEY)
        .option("kinesis.awsSecretKey", DUMMY_SECRET_KEY)
        .option("kinesis.metadataPath", os.path.join(where, "meta"))
        .option("kinesis.startingPosition", "TRIM_HORIZON")
        .options(**extra)
    )
    writer = reader.load().writeStream.format("noop").option("checkpointLocation", os.path.join(where, "checkpoint"))
    return (writer.trigger(processingTime=trigger) if trigger else writer).start()


def produce(kinesis, stream: str, shards: int, per_shard_s: int, size: int, seconds: float) -> int:
    """``per_shard_s`` records a second per shard of ``size`` bytes, for ``seconds``, in ticks of a quarter second
    (random keys spread them over the shards); returns how many were written."""
    per_tick = max(1, round(per_shard_s * shards / TICKS_PER_S))
    every = 1.0 / TICKS_PER_S if per_shard_s * shards >= TICKS_PER_S else per_tick / (per_shard_s * shards)
    written, start = 0, time.monotonic()
    while time.monotonic() - start < seconds:
        put_records(kinesis, stream, [(os.urandom(size), os.urandom(8).hex()) for _ in range(per_tick)])
        written += per_tick
        time.sleep(max(0.0, start + (written / per_tick) * every - time.monotonic()))
    return written


def calls_between(report: QuotaReport, stream: str, start_s: float, end_s: float) -> list[LoggedCall]:
    return [call for call in report.calls if call.stream == stream and start_s <= call.at_s < end_s]


def summarize(trigger: str, rate: str, calls: list[LoggedCall], shards: int, seconds: float) -> RateResult:
    neighbours = [call for call in calls if NEIGHBOUR_TOKEN in call.client]
    ours = [call for call in calls if NEIGHBOUR_TOKEN not in call.client]
    by_shard: dict[str, list[LoggedCall]] = {}
    for call in sorted(ours, key=lambda call: call.at_s):
        by_shard.setdefault(call.shard, []).append(call)
    crowded = (crowded_second(shard, ordered, OUR_LIMIT) for shard, ordered in sorted(by_shard.items()))
    return RateResult(
        trigger,
        rate,
        len(neighbours),
        sum(call.refused for call in neighbours),
        len(ours) / shards / seconds,
        max((most_in_a_second(call.at_s for call in ordered) for ordered in by_shard.values()), default=0),
        sum(call.refused for call in ours),
        next((found for found in crowded if found), ""),
    )


def run_trigger(spark, aws: LocalAws, args: argparse.Namespace, trigger: str, where: str) -> list[RateResult]:
    server = aws.kinesalite
    proxy = server.quota_proxy
    stream = create_stream(server.direct.client("kinesis"), unique_name("bench-busy"), args.shards)
    neighbours = [
        Neighbour(server.endpoint_url, stream, token=f"{NEIGHBOUR_TOKEN}-{i}") for i in range(args.neighbours)
    ]
    for neighbour in neighbours:
        neighbour.start()
    query = start_query(spark, server.endpoint_url, stream, where, TRIGGERS[trigger], dict(args.option))
    producer = server.direct.client("kinesis")
    results = []
    try:
        time.sleep(args.idle_s)
        for rate in args.rates.split(","):
            per_shard_s, size = (int(part) for part in rate.split("x"))
            start_s = proxy.report().elapsed_s
            produce(producer, stream, args.shards, per_shard_s, size, args.busy_s)
            report = proxy.report()
            end_s = report.elapsed_s
            results.append(
                summarize(trigger, rate, calls_between(report, stream, start_s, end_s), args.shards, end_s - start_s)
            )
            print(format_result(results[-1]), flush=True)
    finally:
        query.stop()
        for neighbour in neighbours:
            neighbour.stop()
    return results


def format_result(result: RateResult) -> str:
    share = result.neighbour_refused / result.neighbour_calls if result.neighbour_calls else 0.0
    return (
        f"{result.trigger:>8} {result.rate:>10}: neighbours refused {result.neighbour_refused:>3}/"
        f"{result.neighbour_calls:<4} ({share:5.1%}); ours {result.ours_per_shard_s:.2f} calls/s per shard, "
        f"at most {result.ours_most_in_a_second} in a second, {result.ours_refused} refused"
        + (f"\n{'':>20}more than {OUR_LIMIT} of ours in a second: {result.crowded}" if result.crowded else "")
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--triggers", default=",".join(TRIGGERS), help=f"of {', '.join(TRIGGERS)}")
    parser.add_argument("--rates", default=RATES, help="records a second per shard x bytes, comma-separated")
    parser.add_argument("--busy-s", type=float, default=20.0, help="seconds at each rate")
    parser.add_argument("--idle-s", type=float, default=5.0)
    parser.add_argument("--neighbours", type=int, default=1)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        type=lambda text: tuple(text.split("=", 1)),
        help="a source option key=value (repeatable)",
    )
    args = parser.parse_args(argv)
    unknown = set(args.triggers.split(",")) - set(TRIGGERS)
    if unknown:
        parser.error(f"--triggers: got {sorted(unknown)}; allowed: {', '.join(TRIGGERS)}")
    return args


def busy_phase(spark, aws: LocalAws, args: argparse.Namespace, where: str) -> list[str]:
    """Every trigger and rate of ``args`` on ``aws``'s kinesalite; the lines to print after the per-rate ones
    (those are printed as each rate ends)."""
    print(
        f"{args.shards} shards; {args.neighbours} neighbour(s) polling each shard once a second; "
        f"{args.busy_s:.0f} s per rate; options {args.option or 'the defaults'}",
        flush=True,
    )
    results = [
        result
        for trigger in args.triggers.split(",")
        for result in run_trigger(spark, aws, args, trigger, os.path.join(where, trigger))
    ]
    calls = sum(result.neighbour_calls for result in results)
    refused = sum(result.neighbour_refused for result in results)
    most = max((result.ours_most_in_a_second for result in results), default=0)
    return [
        f"busy beside {args.neighbours} neighbour(s), all rates and triggers: neighbours refused {refused}/{calls} "
        f"({refused / max(calls, 1):.1%}; bar <= 1 %); ours at most {most} in any sliding second on a shard "
        f"(kept: {OUR_LIMIT})"
    ]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    with LocalAws([KINESALITE], quotas=True) as aws, tempfile.TemporaryDirectory() as where:
        spark = spark_session()
        print("kinesalite behind the quota proxy; Spark local[2]")
        lines = busy_phase(spark, aws, args, where)
        spark.stop()
    print("\n".join(lines))


if __name__ == "__main__":
    main()
