"""The README's first command (`make demo`): the whole pipeline on this machine, no AWS account needed.

1. starts a local Kinesis server (kinesalite by default) and creates a source and a sink stream;
2. runs the load generator with its seed template at a steady rate in a background thread, and puts a few
   malformed records into the source stream too;
3. runs the country_counts job on local Spark (local[2]) with the aws-kinesis source and sink;
4. reads the sink stream back and shows a live table of the counts per country;
5. once the generator is done and the counts have settled, stops the job between batches and checks that
   every generated event was counted exactly once and every malformed record went to the dead-letter path
   (``spark_app.verdict`` defines this precisely), prints the verdict and exits 0 only when it holds.

It ends by itself (``--timeout-seconds``, default 170 s) and stops every process it started. ``--aws`` (or
``--endpoint-url``) points the same demo at real Kinesis: it then creates its two streams there, and deletes
them at the end unless ``--keep-streams``.

The local server sits behind AWS's Kinesis quotas (``localaws.quota_proxy``: 5 GetRecords a second per shard,
1,000 records a second written per shard, ...) as the job and the generator would meet them on AWS, and the
demo prints what they were refused; ``--no-quotas`` talks to the server directly. The demo's own setup and its
verdict's reads bypass the quotas: they are the referee, not a reader being judged.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.logging import RichHandler
from rich.table import Table
from rich.text import Text

from localaws import KINESALITE, KINESIS_MOCK, LocalAws
from localaws.streams import create_stream, list_shard_ids, put_records, read_stream, unique_name
from pyspark_aws_kinesis.aws.regions import unknown_region_line
from pyspark_aws_kinesis.cli import OneLineParser, endpoint_url, number
from spark_app import common, country_counts
from spark_app.verdict import Expected, FinalCounts, Verdict, judge, user_payloads

SERVERS = {"kinesalite": KINESALITE, "kinesis-mock": KINESIS_MOCK}
# Records no job should accept; each must end up in the dead-letter path, not crash the job or vanish.
MALFORMED_RECORDS = [b"not json at all", b'{"id": 1, "data": "Spain"}', b"\xff\xfe\x00 binary", b'{"id": "x"}']
WATERMARK_SECONDS = 12 * 3600 + 120
LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
# --seconds, --rate and --window-seconds when not given: the defaults, or with --short these (CI mode). A flag given
# explicitly wins over both.
DEFAULTS = {"seconds": 60.0, "rate": 50.0, "window_seconds": 10}
SHORT = {"seconds": 12.0, "rate": 25.0, "window_seconds": 5}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = OneLineParser(
        prog="python -m spark_app.demo", description=__doc__.split("\n\n")[0], epilog="See docs/jobs.md."
    )
    positive = number(0)
    run = parser.add_argument_group("what runs")
    run.add_argument("--seconds", type=positive, help="how long the generator runs (default: 60; --short: 12)")
    run.add_argument("--rate", type=positive, help="events per second generated (default: 50; --short: 25)")
    run.add_argument(
        "--short",
        action="store_true",
        help="CI mode: 12 s at 25 events/s, 5 s windows; an explicit --seconds, --rate or --window-seconds wins",
    )
    run.add_argument(
        "--window-seconds", type=number(0, whole=True), help="country_counts window (default: 10; --short: 5)"
    )
    # Every trigger runs a micro-batch (0.5-1.5 s each here, 2 queries on 2 cores); 3 s leaves idle time
    # between batches for the final stop to land in.
    run.add_argument("--trigger-seconds", type=positive, default=3.0, help="micro-batch interval (default: 3)")
    run.add_argument(
        "--malformed",
        type=number(0, inclusive=True, maximum=len(MALFORMED_RECORDS), whole=True),
        default=len(MALFORMED_RECORDS),
        help="malformed records to inject (default: %(default)s)",
    )
    run.add_argument("--template", type=Path, help="generator template file (default: generator's seed template)")
    run.add_argument(
        "--timeout-seconds", type=positive, default=170.0, help="the demo ends by then at the latest (default: 170)"
    )
    run.add_argument("--no-live", action="store_true", help="print progress lines instead of a live table")
    where = parser.add_argument_group("where it runs (default: local servers)")
    where.add_argument("--kinesis-server", choices=sorted(SERVERS), default="kinesalite", help="local Kinesis")
    where.add_argument(
        "--no-quotas", action="store_true", help="local server without AWS's Kinesis quotas in front (default: with)"
    )
    where.add_argument("--aws", action="store_true", help="use real AWS (default credential chain) instead")
    where.add_argument(
        "--endpoint-url", type=endpoint_url, help="use this Kinesis endpoint instead of starting a local server"
    )
    where.add_argument("--region", default="us-east-1", help="region of the streams (default: us-east-1)")
    where.add_argument("--source-stream", help="name of the source stream to create (default: demo-source-<id>)")
    where.add_argument("--sink-stream", help="name of the sink stream to create (default: demo-sink-<id>)")
    where.add_argument(
        "--shards", type=number(0, whole=True), default=2, help="shards of the source stream (default: 2)"
    )
    where.add_argument("--keep-streams", action="store_true", help="on AWS, do not delete the streams at the end")
    args = parser.parse_args(argv)
    for name, value in (SHORT if args.short else DEFAULTS).items():
        if getattr(args, name) is None:  # an explicit flag wins over --short
            setattr(args, name, value)
    if args.timeout_seconds < 60:
        parser.error(
            f"--timeout-seconds: got {args.timeout_seconds:g}; allowed: 60 or more (Spark alone starts in 5-15 s)"
        )
    # A local server takes any region; real Kinesis only its own (a typo would fail after the servers started).
    if args.aws and not args.endpoint_url:
        newer = f"give --endpoint-url https://kinesis.{args.region}.amazonaws.com"
        problem = unknown_region_line(args.region, newer=newer)
        if problem:
            parser.error(problem)
    args.source_stream = args.source_stream or unique_name("demo-source")
    args.sink_stream = args.sink_stream or unique_name("demo-sink")
    return args


# --- where: local servers or AWS -----------------------------------------------------------------------------


@dataclass
class Target:
    """The Kinesis endpoint the demo uses, and a boto3 client for its own setup and checks."""

    endpoint_url: str | None
    region: str
    kinesis: Any
    local: bool
    quota_proxy: Any = None  # localaws.quota_proxy.QuotaProxy in front of the local server, if any


@contextlib.contextmanager
def open_target(args: argparse.Namespace, say: Any) -> Iterator[Target]:
    """Start a local server (stopped on exit), or connect to ``--endpoint-url`` / AWS with the default chain."""
    import boto3

    if args.aws or args.endpoint_url:
        kinesis = boto3.client("kinesis", region_name=args.region, endpoint_url=args.endpoint_url)
        say(f"using Kinesis at {args.endpoint_url or 'AWS'} in {args.region}")
        yield Target(args.endpoint_url, args.region, kinesis, local=False)
        return
    # The connector and the generator use boto3's default chain: give it the local servers' dummy keys.
    os.environ.update(LOCAL_CREDENTIALS)
    with LocalAws([SERVERS[args.kinesis_server]], quotas=not args.no_quotas) as aws:
        server = aws[args.kinesis_server]
        say(f"started {server.name} at {server.direct.endpoint_url}")
        if server.quota_proxy is not None:
            say(f"AWS's Kinesis quotas enforced at {server.endpoint_url} (--no-quotas: none)")
        setup = server.direct.client("kinesis", region=args.region)
        yield Target(server.endpoint_url, args.region, setup, local=True, quota_proxy=server.quota_proxy)
    say(f"stopped {server.name}")


@contextlib.contextmanager
def demo_streams(args: argparse.Namespace, target: Target, say: Any) -> Iterator[None]:
    """Create the source and sink streams; on AWS delete them afterwards (unless --keep-streams)."""
    created = []
    try:
        for name, shards in ((args.source_stream, args.shards), (args.sink_stream, 1)):
            create_stream(target.kinesis, name, shards)
            created.append(name)
            say(f"created stream {name} ({shards} shard{'s' if shards > 1 else ''})")
        yield
    finally:
        if not target.local and not args.keep_streams:
            for name in created:
                target.kinesis.delete_stream(StreamName=name, EnforceConsumerDeletion=True)
                say(f"deleted stream {name}")


# --- the generator, in a background thread -------------------------------------------------------------------


@dataclass
class GeneratorRun:
    """The generator running in a daemon thread; ``sent`` is known once it is done."""

    thread: threading.Thread | None = None
    sent: int | None = None
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)

    def start(self, args: argparse.Namespace, target: Target) -> None:
        self.thread = threading.Thread(target=self._run, args=(args, target), name="generator", daemon=True)
        self.thread.start()

    def _run(self, args: argparse.Namespace, target: Target) -> None:
        try:
            import kinesis_generator

            summary = kinesis_generator.run(
                stream_name=args.source_stream,
                template=args.template.read_text() if args.template else kinesis_generator.seed_template(),
                rate=args.rate,
                duration_s=args.seconds,
                endpoint_url=target.endpoint_url,
                region=target.region,
                quiet=True,
            )
            self.sent = summary.records
        except BaseException as error:  # reported by the verdict, never lost in a thread
            self.error = error
        finally:
            self.done.set()


# --- Spark -----------------------------------------------------------------------------------------------------


def start_spark(log_path: Path, app_name: str = "kinesis-demo") -> Any:
    """A local[2] session whose Python workers run this interpreter and import this project.

    The JVM and its Python workers write their logs to ``log_path``: on the terminal they would tear the live
    table (the demo's own messages still go to the terminal).
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    common.put_project_on_worker_path()
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        # The events' dates carry no zone; the verdict reads them as UTC too.
        .config("spark.sql.session.timeZone", "UTC")
    )
    with _stderr_to(log_path):  # the JVM inherits file descriptor 2 when it starts
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


@contextlib.contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    sys.stderr.flush()
    saved = os.dup(2)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def job_arguments(args: argparse.Namespace, target: Target, workdir: Path) -> Any:
    """country_counts' own command line, as an EMR step would pass it."""
    argv = [
        "--source-stream", args.source_stream,
        "--sink-stream", args.sink_stream,
        "--region", target.region,
        "--checkpoint-location", str(workdir / "checkpoint"),
        "--trigger-seconds", f"{args.trigger_seconds:g}",
        "--starting-position", "TRIM_HORIZON",
        "--window-seconds", str(args.window_seconds),
        # The seed template writes `date` with KDG's "hh", a 12-hour clock: its times jump back 12 hours at
        # 01:00 and 13:00. A watermark above 12 h keeps a run across that jump from dropping events as late.
        "--watermark-seconds", str(WATERMARK_SECONDS),
        "--dead-letter-path", str(workdir / "dead-letter"),
    ]  # fmt: skip
    if target.endpoint_url:
        argv += ["--endpoint-url", target.endpoint_url]
    return common.parse_job_args(country_counts.parser(), argv, needs_sink=True)


def stop_queries(queries: list[Any]) -> None:
    """Stop the job's queries between batches, as its stop marker would (raises if one had failed)."""
    stop = common.StopSignal()
    stop.request("the demo is done")
    common.run_until_stopped(queries, stop, batch_grace_s=30)


def count_dead_letters(path: Path) -> int:
    return sum(len(f.read_text().splitlines()) for f in path.glob("batch_id=*/*.json"))


# --- reading the sink -------------------------------------------------------------------------------------------


class SinkTail:
    """Follows every shard of the sink stream from its start; ``poll()`` folds new records into ``final``."""

    def __init__(self, kinesis: Any, stream: str):
        self.kinesis = kinesis
        self.final = FinalCounts()
        self.iterators = {
            shard: kinesis.get_shard_iterator(StreamName=stream, ShardId=shard, ShardIteratorType="TRIM_HORIZON")[
                "ShardIterator"
            ]
            for shard in list_shard_ids(kinesis, stream)
        }

    def poll(self) -> None:
        for shard, iterator in list(self.iterators.items()):
            while iterator:
                answer = self.kinesis.get_records(ShardIterator=iterator, Limit=10000)
                for data in user_payloads(answer["Records"]):
                    self.final.add(data)
                iterator = answer.get("NextShardIterator")
                if not answer["Records"]:
                    break
            self.iterators[shard] = iterator


# --- showing progress -------------------------------------------------------------------------------------------


def render(final: FinalCounts, status: str) -> Group:
    table = Table(title="events per country, read back from the sink stream", min_width=60)
    table.add_column("country")
    table.add_column("events counted", justify="right")
    table.add_column("windows", justify="right")
    windows: dict[str, int] = {}
    for _, country in final.latest:
        windows[country] = windows.get(country, 0) + 1
    per_country = final.per_country()
    for country in sorted(per_country):
        table.add_row(country, str(per_country[country]), str(windows[country]))
    table.add_row("[bold]total", f"[bold]{per_country.total()}", str(len(final.latest)))
    return Group(table, Text(status, style="dim"))


def render_verdict(expected: Expected, final: FinalCounts, dead_letters: int) -> Table:
    """Per country: events in the source stream vs. counted in the sink; and the malformed records."""
    table = Table(title="verdict: sink counts vs. source stream")
    for name in ("country", "in source", "counted", ""):
        table.add_column(name, justify="right" if name else "left")
    want, got = expected.per_country(), final.per_country()
    for country in sorted(set(want) | set(got)):
        table.add_row(country, str(want[country]), str(got[country]), "ok" if want[country] == got[country] else "X")
    table.add_row("malformed", str(expected.malformed), f"{dead_letters} dead letters", "")
    return table


# --- the run ----------------------------------------------------------------------------------------------------


@dataclass
class Progress:
    started: float = field(default_factory=time.monotonic)

    def status(self, generator: GeneratorRun, queries: list[Any], final: FinalCounts, phase: str) -> str:
        batches = max((q.lastProgress or {"batchId": -1})["batchId"] for q in queries) + 1
        gen = "running" if not generator.done.is_set() else f"sent {generator.sent}"
        return (
            f"{time.monotonic() - self.started:4.0f}s {phase}; generator: {gen}; batches done: {batches}; "
            f"sink records: {final.records}"
        )


def run_pipeline(args: argparse.Namespace, console: Console, deadline: float) -> int:
    """Everything from starting the servers to the verdict; returns the exit code."""
    say = console.print
    with contextlib.ExitStack() as stack:
        target = stack.enter_context(open_target(args, say))
        stack.enter_context(demo_streams(args, target, say))
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kinesis-demo-")))
        # Spark first: its start takes 5-15 s, which would otherwise pass with no counts to show.
        queries = start_job(stack, args, target, workdir, say)
        bad = MALFORMED_RECORDS[: args.malformed]
        put_records(target.kinesis, args.source_stream, [(data, f"bad-{i}") for i, data in enumerate(bad)])
        generator = GeneratorRun()
        generator.start(args, target)
        say(f"generator: {args.rate:g} events/s for {args.seconds:g} s, and {len(bad)} malformed records")
        tail = SinkTail(target.kinesis, args.sink_stream)
        expected = watch(args, console, generator, queries, tail, target, workdir, deadline)
        try:
            stop_queries(queries)
        except common.QueryFailedError as error:
            console.print(f"[bold red]VERDICT: FAIL[/] the job failed: {error}")
            return 1
        tail.poll()
        if target.quota_proxy is not None:
            console.print(target.quota_proxy.report().summary(key="stream"), soft_wrap=True, markup=False)
        return report(console, generator, expected, tail.final, count_dead_letters(workdir / "dead-letter"), len(bad))


def start_job(
    stack: contextlib.ExitStack, args: argparse.Namespace, target: Target, workdir: Path, say: Any
) -> list[Any]:
    """Start local Spark and country_counts; both are stopped when ``stack`` closes."""
    log_path = Path(tempfile.gettempdir()) / f"{args.sink_stream}-spark.log"
    say(f"starting Spark (local[2]) and country_counts; Spark's log: {log_path}")
    spark = start_spark(log_path)
    stack.callback(spark.stop)
    common.register_connector(spark)
    queries = country_counts.start(spark, job_arguments(args, target, workdir))
    stack.callback(stop_queries, queries)  # also when anything after this fails
    say(f"country_counts started: {args.source_stream} -> {args.sink_stream}")
    return queries


def report(
    console: Console, generator: GeneratorRun, expected: Expected, final: FinalCounts, dead_letters: int, injected: int
) -> int:
    """Print the verdict table, each problem and the verdict line; 0 when every check held."""
    verdict = judge(expected, final, dead_letters, generator.sent, injected)
    if generator.error is not None:
        verdict = Verdict(False, [f"generator failed: {generator.error!r}", *verdict.problems])
    elif not generator.done.is_set():
        verdict = Verdict(False, ["generator still running at the deadline", *verdict.problems])
    console.print(render_verdict(expected, final, dead_letters))
    for problem in verdict.problems[:20]:
        console.print(f"  [red]- {problem}")
    console.print(
        "[bold green]VERDICT: PASS[/] every generated event was counted exactly once"
        if verdict.ok
        else f"[bold red]VERDICT: FAIL[/] {len(verdict.problems)} problem(s)"
    )
    return 0 if verdict.ok else 1


def watch(
    args: argparse.Namespace,
    console: Console,
    generator: GeneratorRun,
    queries: list[Any],
    tail: SinkTail,
    target: Target,
    workdir: Path,
    deadline: float,
) -> Expected:
    """Show the live table until the counts settle on what the source holds (or the deadline); returns that."""
    progress = Progress()
    expected: Expected | None = None
    live = None if args.no_live or not console.is_terminal else Live(console=console, refresh_per_second=2)
    last_line = 0.0
    with live or contextlib.nullcontext():
        while time.monotonic() < deadline:
            tail.poll()
            if generator.done.is_set() and expected is None:
                expected = read_expected(args, target)
            settled = expected is not None and _settled(expected, tail.final, workdir)
            phase = "settled" if settled else ("draining" if expected else "generating")
            status = progress.status(generator, queries, tail.final, phase)
            if live is not None:
                live.update(render(tail.final, status))
            elif time.monotonic() - last_line >= 5 or settled:
                console.print(status)
                last_line = time.monotonic()
            if settled or any(not q.isActive for q in queries):
                break
            time.sleep(1.0)
    return expected if expected is not None else read_expected(args, target)  # the deadline hit while generating


def read_expected(args: argparse.Namespace, target: Target) -> Expected:
    """What the source stream holds now, read back with boto3: the verdict's reference."""
    return Expected.from_records(user_payloads(read_stream(target.kinesis, args.source_stream)), args.window_seconds)


def _settled(expected: Expected, final: FinalCounts, workdir: Path) -> bool:
    return final.counts() == expected.counts and count_dead_letters(workdir / "dead-letter") >= expected.malformed


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console()
    # Dead-letter warnings are worth seeing; through the console they print above the live table, not into it.
    handler = RichHandler(console=console, show_time=False, show_path=False, show_level=False)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s", handlers=[handler])
    # Leave time to stop everything cleanly: up to 30 s for the job's last batch, then Spark and the servers.
    deadline = time.monotonic() + args.timeout_seconds - 45
    try:
        return run_pipeline(args, console, deadline)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted; everything stopped")
        return 130


if __name__ == "__main__":
    sys.exit(main())
