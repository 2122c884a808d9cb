"""PutRecords done right, once for the whole project: batches filled to the service limits, only failed entries
retried, nothing silently dropped.

Called by the sink (``connector.sink.task``, one ``put_all`` per task, stream and lane) and by the load generator
(``generator.sender``). Kinesis limits one PutRecords call to 500 entries and 5 MiB, and one entry to 1 MiB of
data plus partition key. A call can half-succeed: ``FailedRecordCount`` > 0 and an ``ErrorCode`` on each
failed entry (mostly per-shard throttling). ``put_all`` then sends exactly those entries again, after a
jittered backoff, until each one is stored or the retries run out, when it raises ``PutRecordsFailedError``.

Retry budget: ``retry.max_retries`` bounds the consecutive rounds in which *no* failed entry got through
(and, separately, the retries of a whole call that failed with throttling / 5xx / a timeout). A round that
stores some entries resets that count, because partial throttling is normal on a busy stream and the
records still move; the backoff grows only while nothing moves.

Ordering: calls go out one after another and a call's failed entries are retried before the next call is
sent, so records of one partition key stay in order across calls. Inside one call a retried entry lands after
the entries of the same call that succeeded first (the KPL has the same property).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any

from botocore.exceptions import ClientError

from ..retry import RETRYABLE_ERROR_CODES, RetriesExhaustedError, RetryPolicy, error_code

MAX_ENTRIES_PER_CALL = 500
MAX_BYTES_PER_CALL = 5 * 1024 * 1024
MAX_ENTRY_BYTES = 1024 * 1024  # data + partition key of one record
MAX_PARTITION_KEY_CHARS = 256

# Told of each entry once it is stored, with the ShardId the PutRecords answer gave it (called from the thread
# that sent it: the sink checks where its aggregates landed).
OnStored = Callable[["Entry", str], None]

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


@dataclass(frozen=True, slots=True)
class Entry:
    """One record to put. ``explicit_hash_key`` (a decimal 128-bit integer) overrides the key's MD5 routing."""

    data: bytes
    partition_key: str
    explicit_hash_key: str | None = None

    @property
    def size(self) -> int:
        """Bytes this entry counts against the 1 MiB record and 5 MiB call limits."""
        return len(self.data) + len(self.partition_key.encode("utf-8"))

    def to_request(self) -> dict[str, Any]:
        request: dict[str, Any] = {"Data": self.data, "PartitionKey": self.partition_key}
        if self.explicit_hash_key is not None:
            request["ExplicitHashKey"] = self.explicit_hash_key
        return request


@dataclass
class PutStats:
    """Counters of one or more ``put_all`` runs; add them with ``+=`` (the sink sums them per task and batch).

    records / bytes: entries stored and their data + partition key bytes; calls: PutRecords requests sent
    (retries included); retried_entries: entries sent again after the service failed them; retried_calls:
    whole calls sent again after throttling / 5xx / a timeout; failed_entries: entries given up on (only
    non-zero in the stats a ``PutRecordsFailedError`` carries); elapsed_s: wall time inside ``put_all``.
    """

    records: int = 0
    bytes: int = 0
    calls: int = 0
    retried_entries: int = 0
    retried_calls: int = 0
    failed_entries: int = 0
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


class PutRecordsFailedError(RuntimeError):
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


def check_entry(entry: Entry) -> int:
    """The entry's size; raises ValueError when the service would refuse it whatever we do (size, empty key)."""
    if not entry.partition_key:
        raise ValueError("a Kinesis record needs a non-empty partition key")
    if len(entry.partition_key) > MAX_PARTITION_KEY_CHARS:
        raise ValueError(
            f"partition key of {len(entry.partition_key)} characters is longer than "
            f"the {MAX_PARTITION_KEY_CHARS} Kinesis allows"
        )
    size = entry.size
    if size > MAX_ENTRY_BYTES:
        raise ValueError(
            f"record of {size} bytes (data + partition key) is over the Kinesis limit of "
            f"{MAX_ENTRY_BYTES} bytes (1 MiB)"
        )
    return size


def batches(entries: Iterable[Entry]) -> Iterator[list[Entry]]:
    """Group entries, in order, into PutRecords calls of at most 500 entries and 5 MiB.

    Lazy: each entry is checked (``check_entry``) before the batch holding it is yielded, so an invalid
    entry raises before its batch is sent, but after earlier batches were. Callers that need all-or-nothing
    validation (the sink) check every entry first.
    """
    batch: list[Entry] = []
    batch_bytes = 0
    for entry in entries:
        size = check_entry(entry)
        if len(batch) == MAX_ENTRIES_PER_CALL or batch_bytes + size > MAX_BYTES_PER_CALL:
            yield batch
            batch, batch_bytes = [], 0
        batch.append(entry)
        batch_bytes += size
    if batch:
        yield batch


def put_all(
    client,
    stream_name: str,
    entries: Iterable[Entry],
    retry: RetryPolicy,
    stats: PutStats | None = None,
    on_stored: OnStored | None = None,
) -> PutStats:
    """Store every entry in ``stream_name`` through ``client`` (a boto3 Kinesis client); returns ``stats``.

    ``on_stored(entry, shard_id)`` is called for each entry as its call's answer reports it stored.

    Raises ``PutRecordsFailedError`` when entries stay failed through the retry budget or the service
    refuses the call for good (missing stream, access denied), and ValueError for an entry over the limits.
    """
    stats = stats if stats is not None else PutStats()
    started = time.monotonic()
    try:
        for batch in batches(entries):
            _put_batch(client, stream_name, batch, retry, stats, on_stored)
    finally:
        stats.elapsed_s += time.monotonic() - started
    return stats


def _put_batch(
    client, stream_name: str, batch: list[Entry], retry: RetryPolicy, stats: PutStats, on_stored: OnStored | None
) -> None:
    """Send one batch, then its failed entries again, until all are stored or the budget is spent."""
    pending = batch
    stalled_rounds = 0  # consecutive rounds in which no entry got through
    while True:
        outcome = _send(client, stream_name, pending, retry, stats, on_stored)
        if outcome.permanent_codes:
            raise PutRecordsFailedError(
                stream_name, len(outcome.pending), outcome.permanent_codes, outcome.last_message, stats
            )
        if not outcome.pending:
            return
        stalled_rounds = stalled_rounds + 1 if len(outcome.pending) == len(pending) else 0
        if stalled_rounds > retry.max_retries:
            stats.failed_entries += len(outcome.pending)
            raise PutRecordsFailedError(stream_name, len(outcome.pending), outcome.codes, outcome.last_message, stats)
        stats.retried_entries += len(outcome.pending)
        # Back off by how long nothing has moved (not by the round number), so steady partial throttling
        # keeps a short, jittered pause while a stuck shard backs off up to the policy's maximum.
        retry.sleep_before_retry(stalled_rounds)
        pending = outcome.pending


def _send(
    client, stream_name: str, pending: list[Entry], retry: RetryPolicy, stats: PutStats, on_stored: OnStored | None
) -> _Round:
    """One PutRecords call (whole-call failures retried by ``retry``); sorts the answer per entry."""

    def count_call_retry(attempt: int, exc: BaseException) -> None:
        stats.retried_calls += 1
        stats.calls += 1

    records = [entry.to_request() for entry in pending]
    try:
        answer = retry.call(
            client.put_records,
            StreamName=stream_name,
            Records=records,
            what=f"PutRecords of {len(records)} entries to stream '{stream_name}'",
            on_retry=count_call_retry,
        )
    except RetriesExhaustedError as exc:
        stats.calls += 1
        stats.failed_entries += len(pending)
        codes = Counter({error_code(exc.last_error): len(pending)})
        raise PutRecordsFailedError(stream_name, len(pending), codes, str(exc), stats) from exc
    except ClientError as exc:
        stats.calls += 1
        stats.failed_entries += len(pending)
        code = error_code(exc)
        hint = _PERMANENT_HINTS.get(code, "the service refused the call")
        codes = Counter({code: len(pending)})
        raise PutRecordsFailedError(stream_name, len(pending), codes, str(exc), stats, hint) from exc
    stats.calls += 1
    return _sort_answer(pending, answer["Records"], stats, on_stored)


def _sort_answer(
    pending: list[Entry], results: list[dict[str, Any]], stats: PutStats, on_stored: OnStored | None
) -> _Round:
    outcome = _Round(pending=[])
    for entry, result in zip(pending, results, strict=True):
        code = result.get("ErrorCode")
        if code is None:
            stats.records += 1
            stats.bytes += entry.size
            if on_stored is not None:
                on_stored(entry, result["ShardId"])
            continue
        outcome.pending.append(entry)
        outcome.last_message = f"{code}: {result.get('ErrorMessage', '')}"
        if code in RETRYABLE_ERROR_CODES:
            outcome.codes[code] += 1
        else:
            outcome.permanent_codes[code] += 1
    if outcome.permanent_codes:
        stats.failed_entries += len(outcome.pending)
    return outcome
