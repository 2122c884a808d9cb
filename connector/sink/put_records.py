"""``put_all``: PutRecords calls until every entry is stored, only the failed entries sent again, nothing silently
dropped. The sink calls it once per task, stream and lane (``sink.task``), the load generator once per batch
(``kinesis_generator.pool``). Each call carries what a ``pacing.WritePacer`` lets through from the run's
``shard_queues.ShardQueues``; entries refused for a shard's quota wait there until the shard has room, other
failures back off, and when the retry budget runs out or the service refuses the call for good it raises
``PutRecordsFailedError`` (the budget and the order it keeps: docs/sink.md, "What a task does" and "Delivery").
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields

from botocore.exceptions import ClientError

from ..errors import KinesisConnectorError
from ..retry import RETRYABLE_ERROR_CODES, RetriesExhaustedError, RetryPolicy, error_code, outcome_unknown
from .encoded_body import RAW_ANSWER, PutResult, call_params, decode_answer, prepare_client
from .entries import DEFAULT_LIMITS, MAX_ENTRIES_PER_CALL, Entry, RecordLimits
from .pacing import WritePacer
from .shard_queues import BucketOf, ShardQueues, default_bucket

SHARD_THROTTLE = "ProvisionedThroughputExceededException"
# AWS's per-entry message for a shard's write quota: "Rate exceeded for shard shardId-000000000001 in stream
# exampleStreamName under account 111111111111." (PutRecords API reference).
_QUOTA_MESSAGE = re.compile(r"Rate exceeded for shard (\S+) in stream ")

# Told of each entry once it is stored, with the ShardId the PutRecords answer gave it (called from the thread
# that sent it: the sink checks where its aggregates landed).
OnStored = Callable[[Entry, str], None]
OnUnanswered = Callable[[list[Entry]], None]

# Whole-call errors that no retry can fix, with what the user should check.
_PERMANENT_HINTS = {
    "ResourceNotFoundException": "the stream does not exist in this account/region (check the stream name, "
    "kinesis.region and kinesis.endpointUrl)",
    "AccessDeniedException": "the credentials are not allowed to write to it (they need kinesis:PutRecords "
    "on this stream, and kms:GenerateDataKey if it is encrypted)",
    "UnrecognizedClientException": "the credentials are not valid for this endpoint",
    "InvalidSignatureException": "the request signature was rejected (check the secret key and clock)",
    "ValidationException": "the request was rejected as invalid",
    "InvalidArgumentException": "the request was rejected as invalid",
    "KMSAccessDeniedException": "the stream's KMS key does not allow these credentials to use it",
    "KMSDisabledException": "the stream's KMS key is disabled",
    "KMSNotFoundException": "the stream's KMS key was not found",
}


@dataclass
class PutStats:
    """Counters of one or more ``put_all`` runs; add them with ``+=`` (the sink sums them per task and batch).

    records / bytes: entries stored and their data + partition key bytes; calls: PutRecords requests sent
    (retries included); retried_entries: entries sent again after the service failed them; retried_calls:
    whole calls sent again after throttling / 5xx / a timeout; unanswered_entries: entries of calls that failed
    without saying what they stored (no answer, or a 5xx: ``retry.outcome_unknown``), which may be in the stream
    twice once sent again; failed_entries: entries given up on (only
    non-zero in the stats a ``PutRecordsFailedError`` carries); throttled_calls: calls in which the stream
    refused entries for throughput; paced_s: time spent waiting for the shards to have room (``pacing``);
    elapsed_s: wall time inside ``put_all``.
    """

    records: int = 0
    bytes: int = 0
    calls: int = 0
    retried_entries: int = 0
    retried_calls: int = 0
    unanswered_entries: int = 0
    failed_entries: int = 0
    throttled_calls: int = 0
    paced_s: float = 0.0
    elapsed_s: float = 0.0

    def __iadd__(self, other: PutStats) -> PutStats:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        return self

    def __add__(self, other: PutStats) -> PutStats:
        total = PutStats()
        total += self
        total += other
        return total

    def as_dict(self) -> dict[str, int | float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


class PutRecordsFailedError(KinesisConnectorError, RuntimeError):
    """Entries that could not be stored: retries ran out, or the service refused the call for good.

    Names the stream, how many entries were not stored, the error codes seen (with counts) and the last
    error message; ``stats`` holds what was done before giving up.
    """

    def __init__(
        self,
        stream_name: str,
        failed_entries: int,
        error_codes: Counter[str],
        last_message: str,
        stats: PutStats,
        hint: str = "",
    ):
        self.stream_name = stream_name
        self.failed_entries = failed_entries
        self.error_codes = error_codes
        self.last_message = last_message
        self.stats = stats
        codes = ", ".join(f"{code} x{count}" for code, count in error_codes.most_common()) or "none"
        reason = f": {hint}" if hint else ""
        super().__init__(
            f"PutRecords to Kinesis stream '{stream_name}' failed for {failed_entries} entries{reason}. "
            f"Error codes: {codes}. Last error: {last_message}. "
            f"{stats.records} entries were stored before this error (delivery is at-least-once: "
            f"a retry of the task may send them again)."
        )


@dataclass
class _Round:
    """Outcome of one PutRecords call: which entries still need sending, and why."""

    pending: list[Entry]
    codes: Counter[str] = field(default_factory=Counter)
    permanent_codes: Counter[str] = field(default_factory=Counter)
    last_message: str = ""
    stored: dict[str, tuple[int, int]] = field(default_factory=dict)  # pacing bucket -> (records, bytes)
    throttled: set[str] = field(default_factory=set)  # pacing buckets of the shards that refused for their quota
    unexplained: bool = False  # a failure that does not look like a shard's full second (see _sort_answer)


def put_all(
    client,
    stream_name: str,
    entries: Iterable[Entry],
    retry: RetryPolicy,
    stats: PutStats | None = None,
    on_stored: OnStored | None = None,
    pacer: WritePacer | None = None,
    bucket_of: BucketOf | None = None,
    limits: RecordLimits = DEFAULT_LIMITS,
    on_unanswered: OnUnanswered | None = None,
) -> PutStats:
    """Store every entry in ``stream_name`` through ``client`` (a boto3 Kinesis client); returns ``stats``.

    ``on_stored(entry, shard_id)`` is called for each entry as its call's answer reports it stored. ``pacer``:
    what the shards took lately, kept across ``put_all`` runs of one call sequence (default: a fresh one).
    ``bucket_of``: the shard an entry goes to, when the caller knows the stream's shard map
    (``routing.shard_buckets``); the entries of a shard then wait for its room while other shards' go.
    ``limits``: the stream's largest record and call (``stream_limits``; default: what every stream takes).
    ``on_unanswered(entries)`` is called for the entries of a call that failed without saying what it stored,
    before they are sent again or given up on: they may be in the stream already.

    Raises ``PutRecordsFailedError`` when entries stay failed through the retry budget or the service
    refuses the call for good (missing stream, access denied), and ValueError for an entry over the limits.
    """
    stats = stats if stats is not None else PutStats()
    prepare_client(client)
    pacer = pacer if pacer is not None else WritePacer()
    started = time.monotonic()
    try:
        queues = ShardQueues(entries, bucket_of or default_bucket, limits)
        _send_all(client, stream_name, queues, retry, stats, pacer, on_stored, on_unanswered)
    finally:
        stats.elapsed_s += time.monotonic() - started
    return stats


def _send_all(
    client,
    stream_name: str,
    queues: ShardQueues,
    retry: RetryPolicy,
    stats: PutStats,
    pacer: WritePacer,
    on_stored: OnStored | None,
    on_unanswered: OnUnanswered | None,
) -> None:
    """Send the queued entries as the pacer lets them through, the failed ones again, until all are stored or
    the budget is spent."""
    stalled_rounds = 0  # consecutive rounds in which no entry got through
    stalled_since = 0.0
    while True:
        queues.fill()
        if not queues:
            return
        sending = _paced(queues, retry, pacer, stats)
        sent_at = pacer.clock()
        outcome = _send(client, stream_name, sending, retry, stats, (on_stored, on_unanswered), queues.bucket_of)
        pacer.record(outcome.stored, outcome.throttled, sent_at)
        if outcome.permanent_codes:
            raise PutRecordsFailedError(
                stream_name, len(outcome.pending), outcome.permanent_codes, outcome.last_message, stats
            )
        queues.put_back(outcome.pending)
        if not outcome.pending:
            stalled_rounds = 0
            continue
        stalled_rounds = stalled_rounds + 1 if len(outcome.pending) == len(sending) else 0
        stalled_since = pacer.clock() if stalled_rounds == 1 else stalled_since
        full_second = bool(outcome.throttled) and not outcome.unexplained
        # Refusals for a shard's full second are sent again (when it has room) as long as the policy's backoff
        # would have waited in all: the shard pays its second back. Other failures get the policy's rounds.
        patient = full_second and pacer.clock() - stalled_since < _patience_s(retry)
        if stalled_rounds > retry.max_retries and not patient:
            stats.failed_entries += len(queues)
            raise PutRecordsFailedError(stream_name, len(queues), outcome.codes, outcome.last_message, stats)
        stats.retried_entries += len(outcome.pending)
        if not full_second:
            # Back off by how long nothing has moved (not by the round number), so steady partial failures
            # keep a short, jittered pause while a stuck shard backs off up to the policy's maximum.
            retry.sleep_before_retry(stalled_rounds)
        # A shard's full second: the pacer holds its entries back until the shard has room (pacing's doc).


def _patience_s(retry: RetryPolicy) -> float:
    """How long the policy's backoff waits in all through its retries: how long a shard others keep full may
    refuse our entries before the run gives up."""
    return sum(min(retry.max_interval_ms, retry.initial_interval_ms * 2**k) for k in range(retry.max_retries)) / 1000


def _paced(queues: ShardQueues, retry: RetryPolicy, pacer: WritePacer, stats: PutStats) -> list[Entry]:
    """The entries the shards have room for, out of the queues, after waiting (in ``retry``'s sleep, which a
    deadline may cut) until there is room for at least one."""
    while True:
        counts, wait_s = pacer.plan(queues.sendable(), MAX_ENTRIES_PER_CALL, queues.limits.max_call_bytes)
        if counts:
            return queues.take(counts)
        stats.paced_s += wait_s
        retry.sleep(wait_s)


def _send(
    client,
    stream_name: str,
    pending: list[Entry],
    retry: RetryPolicy,
    stats: PutStats,
    observers: tuple[OnStored | None, OnUnanswered | None],
    bucket_of: BucketOf = default_bucket,
) -> _Round:
    """One PutRecords call (whole-call failures retried by ``retry``); sorts the answer per entry."""
    on_stored, on_unanswered = observers

    def note_unanswered(exc: BaseException) -> None:
        if outcome_unknown(exc):
            stats.unanswered_entries += len(pending)
            if on_unanswered is not None:
                on_unanswered(pending)

    def count_call_retry(attempt: int, exc: BaseException) -> None:
        stats.retried_calls += 1
        stats.calls += 1
        note_unanswered(exc)

    params = call_params(stream_name, pending)
    try:
        answer = retry.call(
            client.put_records,
            **params,
            what=f"PutRecords of {len(pending)} entries to stream '{stream_name}'",
            on_retry=count_call_retry,
        )
    except RetriesExhaustedError as exc:
        stats.calls += 1
        stats.failed_entries += len(pending)
        note_unanswered(exc)
        codes = Counter({error_code(exc.last_error): len(pending)})
        raise PutRecordsFailedError(stream_name, len(pending), codes, str(exc), stats) from exc
    except ClientError as exc:
        stats.calls += 1
        stats.failed_entries += len(pending)
        note_unanswered(exc)
        code = error_code(exc)
        hint = _PERMANENT_HINTS.get(code, "the service refused the call")
        codes = Counter({code: len(pending)})
        raise PutRecordsFailedError(stream_name, len(pending), codes, str(exc), stats, hint) from exc
    stats.calls += 1
    return _sort_answer(pending, decode_answer(answer[RAW_ANSWER]), stats, on_stored, bucket_of)


def _sort_answer(
    pending: list[Entry],
    results: list[PutResult],
    stats: PutStats,
    on_stored: OnStored | None,
    bucket_of: BucketOf = default_bucket,
) -> _Round:
    """Stored entries reported, failed ones kept in order; which pacing buckets met their shard's quota.

    A shard's full second refuses, in the order of the call, every entry after the first refused one (AWS's
    message names the shard). A refusal that names no shard, or a shard that stored an entry after refusing one,
    is not a full second (a fault, or bytes to spare for a small record): the pacer learns nothing from it.
    """
    outcome = _Round(pending=[])
    full: dict[str, set[str]] = {}  # shard id -> pacing buckets of its refused entries
    spare: set[str] = set()  # shards that stored an entry after refusing one
    for entry, result in zip(pending, results, strict=True):
        code = result.ErrorCode
        if code is None:
            bucket = bucket_of(entry)
            stats.records += 1
            stats.bytes += entry.size
            records, nbytes = outcome.stored.get(bucket, (0, 0))
            outcome.stored[bucket] = (records + 1, nbytes + entry.size)
            if result.ShardId in full:
                spare.add(result.ShardId)
            if on_stored is not None:
                on_stored(entry, str(result.ShardId))
            continue
        outcome.pending.append(entry)
        outcome.last_message = f"{code}: {result.ErrorMessage or ''}"
        quota = _QUOTA_MESSAGE.search(result.ErrorMessage or "") if code == SHARD_THROTTLE else None
        if quota is not None:
            full.setdefault(quota.group(1), set()).add(bucket_of(entry))
        else:
            outcome.unexplained = True
        if code in RETRYABLE_ERROR_CODES:
            outcome.codes[code] += 1
        else:
            outcome.permanent_codes[code] += 1
    outcome.throttled = {bucket for shard, buckets in full.items() if shard not in spare for bucket in buckets}
    outcome.unexplained = outcome.unexplained or bool(spare)
    if full:
        stats.throttled_calls += 1
    if outcome.permanent_codes:
        stats.failed_entries += len(outcome.pending)
    return outcome
