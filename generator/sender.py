"""``run()``: render records from a template on schedule and put them into a Kinesis stream.

Who calls it: the CLI (``python -m generator``), the demo (``spark_app.demo``) and tests. The main thread keeps
the schedule (``generator.rates``) against a monotonic clock, renders what is due, optionally KPL-aggregates it
per shard, and queues PutRecords batches; ``workers`` threads send them with ``connector.sink.put_records.put_all``
(which retries exactly the failed entries). Entries still failing after the retry budget are counted as failed
and the run goes on; a refusal no retry can fix (missing stream, access denied) stops the run with its error.
Ctrl-C stops producing, lets queued batches finish, and returns the summary with ``interrupted=True``.
"""

from __future__ import annotations

import bisect
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from connector.aws.clients import kinesis_client
from connector.aws.settings import ClientSettings, infer_region, sdk_default_region
from connector.kpl import Aggregator, hash_key_of
from connector.retry import RETRYABLE_ERROR_CODES, RetryPolicy
from connector.shards import list_shards, open_shards
from connector.sink.put_records import Entry, PutRecordsFailedError, PutStats, batches, put_all
from generator.helpers import Context
from generator.progress import ProgressBar
from generator.rates import ConstantRate, PeriodicRate
from generator.stats import LiveStats, Summary
from generator.template import Template

DEFAULT_PARTITION_KEY = "{{random.alphaNumeric(16)}}"  # random keys spread load over every shard, as the KDG
DEFAULT_RETRY = RetryPolicy(max_retries=5, initial_interval_ms=100, max_interval_ms=5000)
MAX_RECORDS_PER_TICK = 5000  # cap on records rendered between two looks at the clock, progress and Ctrl-C
MIN_TICK_S = 0.01
UserRecord = tuple[str, bytes]  # (partition key, data)
OnSent = Callable[[list[UserRecord]], None]


@dataclass
class _Job:
    """One PutRecords batch and the user records it carries (several per entry when aggregated)."""

    entries: list[Entry]
    user_records: list[UserRecord]


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
) -> Summary:
    """Send records rendered from ``template`` (default: the seed template) into ``stream_name``.

    Rate: ``rate`` records/s, or ``periodic=(mean, stddev)`` for KDG's periodic mode. Stops after ``duration_s``
    seconds or ``count`` records, whichever comes first (one of them is required). ``collect`` keeps every stored
    user record in ``Summary.sent_records``; ``on_sent`` is called with each batch's user records once stored.
    Raises ``TemplateError`` / ValueError before sending anything when the input is bad.
    """
    if duration_s is None and count is None:
        raise ValueError("give a duration (--duration) or a record count (--count) so the run has an end")
    if duration_s is not None and not duration_s > 0:
        raise ValueError(f"--duration must be > 0 seconds, got {duration_s}")
    if count is not None and count < 1:
        raise ValueError(f"--count must be >= 1, got {count}")
    if workers < 1:
        raise ValueError(f"--workers must be >= 1, got {workers}")
    ctx = Context(seed)
    record = Template(template if template is not None else seed_template(), ctx)
    key = Template(partition_key or DEFAULT_PARTITION_KEY, ctx)
    _check_key(key)
    schedule = PeriodicRate(*periodic, rng=ctx.rng) if periodic else ConstantRate(rate or 0.0)
    limit = _limit(schedule, duration_s, count)
    kinesis = client if client is not None else make_client(endpoint_url, region, workers, retry)
    shard_starts = _shard_ranges(kinesis, stream_name, retry) if aggregate else None

    stats = LiveStats()
    sent: list[UserRecord] | None = [] if collect else None
    pool = _SenderPool(kinesis, stream_name, retry, stats, workers, _recorder(sent, on_sent))
    bar = ProgressBar(stats, count, duration_s) if not quiet else None
    interrupted = False
    try:
        if bar:
            bar.__enter__()
        _produce(schedule, limit, record, key, pool, bar, shard_starts)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        pool.close()
        if bar:
            bar.__exit__(None, None, None)
    if pool.fatal is not None:
        raise pool.fatal
    return stats.summary(schedule.describe(), interrupted, sent)


def seed_template() -> str:
    """The KDG seed template shipped as ``generator/templates/seed.json`` (the default template)."""
    from pathlib import Path

    return (Path(__file__).parent / "templates" / "seed.json").read_text()


def make_client(endpoint_url: str | None, region: str | None, workers: int, retry: RetryPolicy) -> Any:
    """The Kinesis client, built by ``connector.aws`` like every client of the project."""
    region = region or infer_region(endpoint_url) or sdk_default_region()
    if not region:
        raise ValueError("--region is not set and cannot be inferred from --endpoint-url or the AWS config")
    settings = ClientSettings(region=region, endpoint_url=endpoint_url, retry=retry, max_pool_connections=workers + 2)
    return kinesis_client(settings)


def _check_key(key: Template) -> None:
    sample = key.render()
    if not sample or len(sample) > 256:
        raise ValueError(
            f"--partition-key template {key.source!r} rendered {sample!r}: a partition key must be 1 to 256 characters"
        )


def _limit(schedule: ConstantRate | PeriodicRate, duration_s: float | None, count: int | None) -> int:
    """Total records of the run: what the schedule has due just before the duration ends, capped by count."""
    by_time = schedule.due(duration_s - 1e-9) if duration_s is not None else None
    return min(x for x in (by_time, count) if x is not None)


def _recorder(sent: list[UserRecord] | None, on_sent: OnSent | None) -> OnSent | None:
    if sent is None:
        return on_sent

    def record(users: list[UserRecord]) -> None:
        sent.extend(users)
        if on_sent is not None:
            on_sent(users)

    return record


def _shard_ranges(kinesis: Any, stream_name: str, retry: RetryPolicy) -> list[int]:
    """Starting hash keys of the open shards, sorted: one Aggregator per shard keeps aggregates on one shard."""
    return [shard.starting_hash_key for shard in open_shards(list_shards(kinesis, stream_name, retry))]


def _produce(
    schedule: ConstantRate | PeriodicRate,
    limit: int,
    record: Template,
    key: Template,
    pool: _SenderPool,
    bar: ProgressBar | None,
    shard_starts: list[int] | None,
) -> None:
    """The schedule loop: send what is due, then sleep until the next record is due (or the run ends)."""
    started = pool.stats.started = time.monotonic()
    produced, last_bar = 0, 0.0
    while produced < limit and pool.fatal is None:
        now = time.monotonic() - started
        # Past the duration, schedule.due(now) >= limit: what is left is sent, then the loop ends.
        due = min(schedule.due(now), limit) - produced
        if due > 0:
            due = min(due, MAX_RECORDS_PER_TICK)
            users = [(key.render(), record.render().encode("utf-8")) for _ in range(due)]
            pool.submit(users, _aggregate(users, shard_starts) if shard_starts is not None else None)
            produced += due
        else:
            # At least MIN_TICK_S between ticks so high rates go out in batches, not one call per record.
            time.sleep(min(max(schedule.next_due_s(produced) - now, MIN_TICK_S), 0.25))
        if bar and now - last_bar >= 0.2:
            bar.update()
            last_bar = now


def _aggregate(users: list[UserRecord], shard_starts: list[int]) -> list[tuple[Entry, list[UserRecord]]]:
    """KPL aggregates of one tick's records, one Aggregator per shard, each with the user records it holds."""
    groups: dict[int, list[UserRecord]] = {}
    for pk, data in users:
        groups.setdefault(bisect.bisect_right(shard_starts, hash_key_of(pk)) - 1, []).append((pk, data))
    out: list[tuple[Entry, list[UserRecord]]] = []
    for members in groups.values():
        aggregator = Aggregator()
        done = [record for pk, data in members for record in aggregator.add(data, pk)]
        last = aggregator.flush()
        done += [last] if last is not None else []
        start = 0  # aggregates come out in the order of their records: slice the members along
        for record in done:
            entry = Entry(record.data, record.partition_key, record.explicit_hash_key)
            out.append((entry, members[start : start + record.user_records]))
            start += record.user_records
    return out


class _SenderPool:
    """``workers`` threads taking batches from a bounded queue (back-pressure on the producer) and putting them."""

    def __init__(
        self, kinesis: Any, stream: str, retry: RetryPolicy, stats: LiveStats, workers: int, on_sent: OnSent | None
    ):
        self.kinesis, self.stream, self.retry, self.stats, self.on_sent = kinesis, stream, retry, stats, on_sent
        self.fatal: BaseException | None = None
        self._queue: queue.Queue[_Job | None] = queue.Queue(maxsize=workers * 2)
        self._threads = [
            threading.Thread(target=self._work, name=f"generator-sender-{i}", daemon=True) for i in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, users: list[UserRecord], aggregated: list[tuple[Entry, list[UserRecord]]] | None) -> None:
        """Queue the records as PutRecords batches (blocks while the senders are behind)."""
        if aggregated is None:
            entries = [Entry(data, pk) for pk, data in users]
            owners = {id(entry): [user] for entry, user in zip(entries, users, strict=True)}
        else:
            entries = [entry for entry, _ in aggregated]
            owners = {id(entry): members for entry, members in aggregated}
        for batch in batches(entries):
            self._queue.put(_Job(batch, [user for entry in batch for user in owners[id(entry)]]))

    def close(self) -> None:
        """Let queued batches finish, then stop the threads."""
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join()

    def _work(self) -> None:
        while (job := self._queue.get()) is not None:
            if self.fatal is None:
                try:
                    self._send(job)
                except Exception as exc:  # e.g. the caller's on_sent: stop the run, keep draining the queue
                    self.fatal = exc

    def _send(self, job: _Job) -> None:
        stats = PutStats()
        try:
            put_all(self.kinesis, self.stream, job.entries, self.retry, stats)
        except PutRecordsFailedError as exc:
            # Which entries of the batch got through is not reported: count all its user records as failed
            # when the batch failed, in proportion otherwise.
            failed = round(len(job.user_records) * exc.failed_entries / max(1, len(job.entries)))
            self.stats.add(stats, len(job.user_records) - failed, failed)
            if not set(exc.error_codes) <= RETRYABLE_ERROR_CODES:
                self.fatal = exc
            return
        except Exception as exc:  # a bad entry or an unexpected client error: stop the run, report it
            self.fatal = exc
            self.stats.add(stats, 0, len(job.user_records))
            return
        self.stats.add(stats, len(job.user_records), 0)
        if self.on_sent is not None:
            self.on_sent(job.user_records)
