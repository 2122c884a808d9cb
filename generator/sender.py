"""``run()``: render records from a template on schedule and put them into a Kinesis stream, within the time given.

Who calls it: the CLI (``python -m kinesis_generator``), the demo (``spark_app.demo``), benchmarks and tests.

1. Checks before anything is sent (``kinesis_generator.checks``): the templates compile, the profile, region and
   credentials exist, the stream exists (one ListShards: its open shards give the write limit the summary
   compares the rate with, and the hash ranges ``--aggregate`` needs).
2. The schedule: the main thread keeps it (``kinesis_generator.rates``) against a monotonic clock, renders what is due,
   optionally KPL-aggregates it per shard, and queues PutRecords batches for the sending threads
   (``kinesis_generator.pool``), which retry refused entries with backoff.
3. The end: ``count`` records or ``duration_s`` seconds on the wall clock, whichever comes first. At the deadline
   nothing new is sent and no retry starts; calls under way may finish within the grace (``deadline.Timeouts``). Records
   refused through the whole retry budget count as failed and the run goes on; a refusal no retry can fix
   (missing stream, access denied) stops the run with a ``GeneratorError``. Ctrl-C ends the run as the deadline
   does, and the summary says ``interrupted``.
"""

from __future__ import annotations

import bisect
import time
from typing import Any

from kinesis_generator import checks
from kinesis_generator.deadline import SMALL_CALLS, Deadline, DeadlineRetry, Timeouts
from kinesis_generator.errors import TargetError, UsageError
from kinesis_generator.helpers import Context
from kinesis_generator.large_records import LargeRecords
from kinesis_generator.pool import OnSent, SenderPool, UserRecord
from kinesis_generator.progress import ProgressBar
from kinesis_generator.rates import ConstantRate, PeriodicRate
from kinesis_generator.stats import LiveStats, Summary
from kinesis_generator.template import Template, TemplateError
from pyspark_aws_kinesis.aws.clients import kinesis_client
from pyspark_aws_kinesis.aws.settings import ClientSettings
from pyspark_aws_kinesis.kpl import Aggregator, OutgoingRecord, hash_key_of
from pyspark_aws_kinesis.retry import RetryPolicy
from pyspark_aws_kinesis.shards import Shard
from pyspark_aws_kinesis.sink.entries import Entry
from pyspark_aws_kinesis.sink.planning import AGGREGATE_BYTES
from pyspark_aws_kinesis.sink.routing import ShardRouter, shard_buckets

DEFAULT_PARTITION_KEY = "{{random.alphaNumeric(16)}}"  # random keys spread load over every shard, as the KDG
DEFAULT_RETRY = RetryPolicy(max_retries=5, initial_interval_ms=100, max_interval_ms=5000)
MAX_RECORDS_PER_TICK = 5000  # cap on records rendered between two looks at the clock and the deadline
MIN_TICK_S = 0.1  # a tick's records make one PutRecords call (or a few): see _produce
# The last tick of a timed run comes this long before the deadline and takes every record due before it, so
# that its batch starts before the deadline (no call starts after it).
FINAL_TICK_S = 0.1
HOLD_S = 0.5  # the longest a record waits in an aggregate that is not full (--aggregate)
Schedule = ConstantRate | PeriodicRate


def run(
    stream_name: str,
    template: str | None = None,
    rate: float | None = 100.0,
    duration_s: float | None = None,
    count: int | None = None,
    *,
    periodic: tuple[float, float] | None = None,
    partition_key: str | None = None,
    endpoint_url: str | None = None,
    region: str | None = None,
    client: Any = None,
    workers: int = 1,
    aggregate: bool = False,
    retry: RetryPolicy = DEFAULT_RETRY,
    seed: int | None = None,
    quiet: bool = True,
    collect: bool = False,
    on_sent: OnSent | None = None,
    large: LargeRecords | None = None,
) -> Summary:
    """Send records rendered from ``template`` (default: the seed template) into ``stream_name``.

    Rate: ``rate`` records/s, or ``periodic=(mean, stddev)`` for KDG's periodic mode. Stops after ``count``
    records or ``duration_s`` seconds on the wall clock (retries included), whichever comes first (one of them is
    required). ``large``: a share of the records padded to a size. ``collect`` keeps every stored user record in
    ``Summary.sent_records``; ``on_sent`` is called with each batch's stored user records. Before sending anything,
    raises ``TemplateError`` or ``UsageError`` (both ValueErrors) for bad input and ``TargetError`` for a stream
    that cannot be written; during the run, ``GeneratorError`` (with ``.summary``) for a refusal no retry fixes.
    """
    _check_length(duration_s, count, workers)
    ctx = Context(seed)
    record = Template(template if template is not None else seed_template(), ctx)
    key = _key_template(partition_key or DEFAULT_PARTITION_KEY, ctx)
    schedule = PeriodicRate(*periodic, rng=ctx.rng) if periodic else ConstantRate(rate or 0.0)
    limit = _limit(schedule, duration_s, count)
    timeouts = Timeouts.for_calls_of(large.largest_call_bytes()) if large is not None else SMALL_CALLS
    kinesis = client if client is not None else make_client(endpoint_url, region, workers, retry, timeouts)
    target = checks.Target.of(kinesis, stream_name, endpoint_url)
    shards = _open_shards(kinesis, target, aggregate)
    limits = checks.record_limits(kinesis, target)
    if large is not None:
        large.check(limits)

    stats, deadline = LiveStats(collect), Deadline()
    sent: list[UserRecord] | None = [] if collect else None
    bucket_of = shard_buckets(ShardRouter(shards)) if shards else None  # each shard paced on its own
    pool = SenderPool(
        kinesis,
        stream_name,
        DeadlineRetry.of(retry, deadline),
        stats,
        workers,
        _recorder(sent, on_sent),
        bucket_of,
        limits,
    )
    bar = None if quiet else ProgressBar(stats, count, duration_s, schedule.mean_per_s)
    shard_starts = [shard.starting_hash_key for shard in shards] if aggregate and shards else None
    interrupted = False
    try:
        started = stats.start()
        if duration_s is not None:
            deadline.set(started + duration_s)
        if bar:
            bar.start()
        _produce(schedule, limit, duration_s, started, (record, key, large), pool, shard_starts)
    except KeyboardInterrupt:
        interrupted = True
        deadline.stop()
    except (
        ValueError
    ) as exc:  # a rendered record over the Kinesis limits (pyspark_aws_kinesis.sink.entries.check_entry)
        raise UsageError(f"--template: {exc}", "--template") from None
    finally:
        interrupted = _close(pool, deadline, timeouts.grace_s, bar) or interrupted
    due = pool.submitted if interrupted else limit
    summary = stats.summary(
        schedule.describe(), schedule.mean_per_s, due, _count(shards), interrupted, sent, grace_s=timeouts.grace_s
    )
    if pool.fatal is not None:
        if not checks.is_aws_error(pool.fatal):
            raise pool.fatal  # the caller's on_sent broke: its own error
        raise checks.explain(pool.fatal, target).after(summary) from pool.fatal
    return summary


def seed_template() -> str:
    """The KDG seed template shipped as ``generator/templates/seed.json`` (the default template)."""
    from pathlib import Path

    return (Path(__file__).parent / "templates" / "seed.json").read_text()


def make_client(
    endpoint_url: str | None, region: str | None, workers: int, retry: RetryPolicy, timeouts: Timeouts = SMALL_CALLS
) -> Any:
    """The Kinesis client, built by ``pyspark_aws_kinesis.aws`` like every client of the project, after the checks that
    need no call: the endpoint URL, the profile, the region, the credentials. Its ``timeouts`` make the deadline's
    grace."""
    checks.check_endpoint(endpoint_url)
    checks.check_profile()
    region = checks.resolve_region(region, endpoint_url)
    checks.check_credentials(endpoint_url)
    settings = ClientSettings(
        region=region,
        endpoint_url=endpoint_url,
        retry=retry,
        max_pool_connections=workers + 2,
        connect_timeout_s=timeouts.connect_s,
        read_timeout_s=timeouts.read_s,
    )
    try:
        return kinesis_client(settings)
    except ValueError as exc:  # botocore: "Invalid endpoint: ..."
        raise UsageError(
            f"--endpoint-url {endpoint_url}: {exc}: give a URL such as http://127.0.0.1:4567", "--endpoint-url"
        ) from None


def _open_shards(kinesis: Any, target: checks.Target, aggregate: bool) -> list[Shard] | None:
    """The stream's open shards (None when they cannot be listed, which ``--aggregate`` cannot do without)."""
    shards = checks.check_stream(kinesis, target)
    if aggregate and not shards:
        raise TargetError(
            "--aggregate: the stream's shards could not be listed (it needs kinesis:ListShards on the stream): "
            "allow it, or leave --aggregate out",
            "--aggregate",
        )
    return shards


def _check_length(duration_s: float | None, count: int | None, workers: int) -> None:
    if duration_s is None and count is None:
        raise UsageError("give --duration SECONDS or --count RECORDS (or both) so the run has an end", "--duration")
    if duration_s is not None and not duration_s > 0:
        raise UsageError(f"--duration must be > 0 seconds, got {duration_s}", "--duration")
    if count is not None and count < 1:
        raise UsageError(f"--count must be >= 1, got {count}", "--count")
    if workers < 1:
        raise UsageError(f"--workers must be >= 1, got {workers}", "--workers")


def _key_template(source: str, ctx: Context) -> Template:
    """The partition key template, compiled and tried once: keys must be 1 to 256 characters."""
    try:
        key = Template(source, ctx)
    except TemplateError as exc:
        raise UsageError(f"--partition-key: {exc}", "--partition-key") from None
    sample = key.render()
    if not sample or len(sample) > 256:
        raise UsageError(
            f"--partition-key template {source!r} rendered {sample!r}: a partition key must be 1 to 256 characters",
            "--partition-key",
        )
    return key


def _limit(schedule: Schedule, duration_s: float | None, count: int | None) -> int:
    """Total records of the run: what the schedule has due just before the duration ends, capped by count."""
    by_time = schedule.due_before(duration_s) if duration_s is not None else None
    return min(x for x in (by_time, count) if x is not None)


def _count(shards: list[Shard] | None) -> int | None:
    return None if shards is None else len(shards)


def _recorder(sent: list[UserRecord] | None, on_sent: OnSent | None) -> OnSent | None:
    if sent is None:
        return on_sent

    def record(users: list[UserRecord]) -> None:
        sent.extend(users)
        if on_sent is not None:
            on_sent(users)

    return record


def _produce(
    schedule: Schedule,
    limit: int,
    duration_s: float | None,
    started: float,
    content: tuple[Template, Template, LargeRecords | None],
    pool: SenderPool,
    shard_starts: list[int] | None,
) -> None:
    """The schedule loop: send what is due, then sleep until the next record is due, until ``limit`` records
    are queued, the deadline comes (what is not queued by then is not sent) or the run fails."""
    produced = 0
    final_tick = None if duration_s is None else duration_s - FINAL_TICK_S
    packer = _Packer(shard_starts) if shard_starts is not None else None
    while produced < limit and pool.fatal is None and not pool.deadline.passed():
        now = time.monotonic() - started
        # From the final tick on, everything due before the deadline is due now.
        last = final_tick is not None and now >= final_tick
        due = (limit if last else min(schedule.due(now), limit)) - produced
        if due > 0:
            due = min(due, MAX_RECORDS_PER_TICK)
            users = [_render(content, produced + i) for i in range(due)]
            produced += due
            aggregated = None if packer is None else packer.add(users, now, last or produced == limit)
            if not pool.submit(users, aggregated):
                return
        else:
            if packer is not None and not pool.submit([], packer.add([], now, False)):
                return
            wake = schedule.next_due_s(produced)
            wake = wake if final_tick is None else min(wake, final_tick)
            # At least MIN_TICK_S between ticks so that records go out in calls of a tenth of a second's worth:
            # with 10 ms ticks, 3,000 records/s went out 30 records (or one ~15 KB aggregate per shard) a call,
            # and the sending thread spent its time on round trips, under the quota with nothing refused. But
            # never past the final tick: a tick just before it slept almost to the deadline, and a sleep that
            # overran by a few ms on a loaded machine left the last records unsent.
            pause = max(wake - now, MIN_TICK_S)
            if final_tick is not None:
                pause = min(pause, max(final_tick - now, 0.0))
            time.sleep(min(pause, 0.25))


def _render(content: tuple[Template, Template, LargeRecords | None], index: int) -> UserRecord:
    """Record number ``index``: its partition key and data, padded when it is one of the large ones."""
    record, key, large = content
    partition_key, data = key.render(), record.render().encode("utf-8")
    return large.record(index, partition_key, data) if large is not None else (partition_key, data)


class _Packer:
    """KPL aggregates per shard, filled across ticks: an aggregate goes when it is full, when it has waited
    ``HOLD_S`` since its first record, or at the end of the run. (One aggregate per shard and tick made ~150 KB
    aggregates at 3,000 records/s; six fit in a shard's 1 MiB second and the rest of it went unused: 87 % of the
    quota.)"""

    def __init__(self, shard_starts: list[int]):
        self.shard_starts = shard_starts
        self.open: dict[int, tuple[Aggregator, list[UserRecord], float]] = {}

    def add(self, users: list[UserRecord], now: float, end: bool) -> list[tuple[Entry, list[UserRecord]]]:
        """The aggregates ready after adding ``users`` at ``now`` (all of them at the ``end``), each with its user
        records."""
        out: list[tuple[Entry, list[UserRecord]]] = []
        for pk, data in users:
            shard = bisect.bisect_right(self.shard_starts, hash_key_of(pk)) - 1
            aggregator, members, opened = self.open.get(shard) or (Aggregator(AGGREGATE_BYTES), [], now)
            members.append((pk, data))
            for done in aggregator.add(data, pk):
                out.append(_entry_of(done, members[: done.user_records]))
                del members[: done.user_records]
            self.open[shard] = (aggregator, members, opened if members[:-1] else now)
        for shard, (aggregator, members, opened) in list(self.open.items()):
            if members and (end or now - opened >= HOLD_S):
                last = aggregator.flush()
                if last is not None:
                    out.append(_entry_of(last, members))
                del self.open[shard]
        return out


def _entry_of(record: OutgoingRecord, members: list[UserRecord]) -> tuple[Entry, list[UserRecord]]:
    return Entry(record.data, record.partition_key, record.explicit_hash_key), list(members)


def _close(pool: SenderPool, deadline: Deadline, grace_s: float, bar: ProgressBar | None) -> bool:
    """Wait for the senders (at most ``grace_s`` after the deadline) and stop the progress display; True when a
    second Ctrl-C cut that wait short."""
    cut = False
    try:
        pool.close(None if deadline.at is None else deadline.at + grace_s)
    except KeyboardInterrupt:  # stop waiting for the calls under way
        deadline.stop()
        cut = True
    if bar:
        bar.stop()
    return cut
