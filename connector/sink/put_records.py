"""PutRecords done right, once for the whole project: batches filled to the service limits, only failed entries
retried, nothing silently dropped.

Called by the sink (``pyspark_aws_kinesis.sink.task``, one ``put_all`` per task, stream and lane) and by the load
generator (``kinesis_generator.sender``). Kinesis limits one PutRecords call to 500 entries and 5 MiB, and one entry to
1 MiB of data plus partition key. A call can half-succeed: ``FailedRecordCount`` > 0 and an ``ErrorCode`` on each
failed entry (mostly per-shard throttling). ``put_all`` then sends exactly those entries again, after a
jittered backoff, until each one is stored or the retries run out, when it raises ``PutRecordsFailedError``.

At the write quota (1,000 records and 1 MiB a second per shard): a ``pyspark_aws_kinesis.sink.pacing.WritePacer``
keeps our share of each shard (the quota, less what refusals say other writers take) and sizes each call to it,
shard by shard: the pending entries wait in one queue per shard (``_Pool``; one for the stream when the caller
gives no shard map), so a full shard's entries wait while the other shards' go, and when nothing fits the call
waits until a shard has paid back our oldest write of the last second: refused entries are sent again when the
shard has room, not after a fixed backoff, and the next calls are not refused in turn.

Retry budget: ``retry.max_retries`` bounds the consecutive rounds in which *no* failed entry got through
(and, separately, the retries of a whole call that failed with throttling / 5xx / a timeout). A round that
stores some entries resets that count, because partial throttling is normal on a busy stream and the
records still move. Quota refusals wait in the pacer (for the payback of our oldest write to the shard, or a
jittered part of a second when other writers fill it), for as long as the policy's backoff would have waited in
all; other failures back off exponentially.

Encoding: botocore would validate every entry, base64 each one in Python and build the JSON body, then parse
the answer entry by entry (~6 ms of CPU for 500 entries of 1 KiB, ``bench/sink_encode.py``). ``prepare_client``
teaches the client a shortcut instead: ``_send`` encodes the body itself with msgspec (which writes ``bytes`` as
base64 in C), hands it over in the private ``ENCODED_BODY`` parameter beside a one-entry placeholder that botocore
validates and serializes cheaply, and a ``before-call`` hook swaps the body in before the request is signed; the
answer of such a call comes back undecoded (a ``before-parse`` hook) and msgspec reads it. Signing, endpoints,
retries and error answers stay botocore's, and the client's other calls (a PutRecords of someone else's
included) are untouched.

Ordering: calls go out one after another, a key's records all wait in its shard's queue (or the stream's) in
order, and a call's failed entries go back to the front of their queue, so records of one partition key stay in
order across calls. Inside one call a retried entry lands after the entries of the same call that succeeded
first (the KPL has the same property).
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields
from itertools import islice
from typing import Any

import msgspec
from botocore.exceptions import ClientError

from ..retry import RETRYABLE_ERROR_CODES, RetriesExhaustedError, RetryPolicy, error_code
from .pacing import ANY_SHARD, WritePacer

MAX_ENTRIES_PER_CALL = 500
MAX_BYTES_PER_CALL = 5 * 1024 * 1024
MAX_ENTRY_BYTES = 1024 * 1024  # data + partition key of one record
MAX_PARTITION_KEY_CHARS = 256

SHARD_THROTTLE = "ProvisionedThroughputExceededException"
# AWS's per-entry message for a shard's write quota: "Rate exceeded for shard shardId-000000000001 in stream
# exampleStreamName under account 111111111111." (PutRecords API reference).
_QUOTA_MESSAGE = re.compile(r"Rate exceeded for shard (\S+) in stream ")

ENCODED_BODY = "ConnectorEncodedBody"  # private put_records parameter: the request body, already encoded
_PLACEHOLDER = [{"Data": b"", "PartitionKey": "-"}]  # what botocore validates and serializes in its place
RAW_ANSWER = "ConnectorRawAnswer"  # where such a call's answer carries its undecoded body
_BODY_ENCODER = msgspec.json.Encoder()
# Whether the PutRecords call in progress on this thread carries our body: botocore builds, sends and parses a
# call on the thread that made it, and its before-parse hook is not told the call's context.
_call = threading.local()


class _PutResult(msgspec.Struct, gc=False):
    """One entry of a PutRecords answer: stored (SequenceNumber, ShardId) or failed (ErrorCode, ErrorMessage)."""

    SequenceNumber: str | None = None
    ShardId: str | None = None
    ErrorCode: str | None = None
    ErrorMessage: str | None = None


class _PutAnswer(msgspec.Struct):
    Records: list[_PutResult]


_ANSWER = msgspec.json.Decoder(_PutAnswer)

# Told of each entry once it is stored, with the ShardId the PutRecords answer gave it (called from the thread
# that sent it: the sink checks where its aggregates landed).
OnStored = Callable[["Entry", str], None]
# The pacing bucket of an entry: its shard's id when the caller knows it, else ``pacing.ANY_SHARD``.
BucketOf = Callable[["Entry"], str]
# How much of the caller's entries a put_all holds at most beyond what it sends (``_Pool``): enough for every
# shard's next calls while a busier one is full, bounded for callers that stream their entries in.
LOOKAHEAD_BYTES = 64 * 1024 * 1024

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
    non-zero in the stats a ``PutRecordsFailedError`` carries); throttled_calls: calls in which the stream
    refused entries for throughput; paced_s: time spent waiting for the shards to have room (``pacing``);
    elapsed_s: wall time inside ``put_all``.
    """

    records: int = 0
    bytes: int = 0
    calls: int = 0
    retried_entries: int = 0
    retried_calls: int = 0
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
    stored: dict[str, tuple[int, int]] = field(default_factory=dict)  # pacing bucket -> (records, bytes)
    throttled: set[str] = field(default_factory=set)  # pacing buckets of the shards that refused for their quota
    unexplained: bool = False  # a failure that does not look like a shard's full second (see _sort_answer)


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
    pacer: WritePacer | None = None,
    bucket_of: BucketOf | None = None,
) -> PutStats:
    """Store every entry in ``stream_name`` through ``client`` (a boto3 Kinesis client); returns ``stats``.

    ``on_stored(entry, shard_id)`` is called for each entry as its call's answer reports it stored. ``pacer``:
    what the shards took lately, kept across ``put_all`` runs of one call sequence (default: a fresh one).
    ``bucket_of``: the shard an entry goes to, when the caller knows the stream's shard map
    (``routing.shard_buckets``); the entries of a shard then wait for its room while other shards' go.

    Raises ``PutRecordsFailedError`` when entries stay failed through the retry budget or the service
    refuses the call for good (missing stream, access denied), and ValueError for an entry over the limits.
    """
    stats = stats if stats is not None else PutStats()
    prepare_client(client)
    pacer = pacer if pacer is not None else WritePacer()
    started = time.monotonic()
    try:
        _put_pool(client, stream_name, _Pool(entries, bucket_of or default_bucket), retry, stats, on_stored, pacer)
    finally:
        stats.elapsed_s += time.monotonic() - started
    return stats


class _Pool:
    """The entries not stored yet, per pacing bucket and in order within each, pulled from the caller's iterable
    as the calls need them: a shard that is full does not hold back the others (a whole call's entries waiting
    for its busiest shard would hold each shard to the busiest one's pace).

    Each entry is checked (``check_entry``) as it is pulled, so an invalid entry raises before a call carries
    it, but after earlier calls were made.
    """

    def __init__(self, entries: Iterable[Entry], bucket_of: BucketOf):
        self._source: Iterator[Entry] | None = iter(entries)
        self.bucket_of = bucket_of
        self.queues: dict[str, deque[Entry]] = {}
        self.retries: dict[str, int] = {}  # refused entries at the front of a bucket: its next call carries only them
        self.count = 0
        self.bytes = 0

    def __len__(self) -> int:
        return self.count

    def fill(self) -> None:
        """Pull entries until every bucket holds a call's worth, or LOOKAHEAD_BYTES are held, or the source ends."""
        while self._source is not None and self.bytes < LOOKAHEAD_BYTES and not self._each_holds_a_call():
            entry = next(self._source, None)
            if entry is None:
                self._source = None
                return
            size = check_entry(entry)
            self.queues.setdefault(self.bucket_of(entry), deque()).append(entry)
            self.count += 1
            self.bytes += size

    def _each_holds_a_call(self) -> bool:
        return bool(self.queues) and all(len(queue) >= MAX_ENTRIES_PER_CALL for queue in self.queues.values())

    def sendable(self) -> dict[str, Iterable[Entry]]:
        """Each bucket's entries a call may carry, in order: a bucket's refused entries go alone (a record sent
        after them could land before one refused twice), its others after."""
        return {
            key: islice(queue, self.retries[key]) if self.retries.get(key) else queue
            for key, queue in self.queues.items()
        }

    def take(self, counts: dict[str, int]) -> list[Entry]:
        """The first ``counts[bucket]`` entries of each bucket, out of the pool; the buckets that gave go last
        in the next plan (every shard gets the front of a call in turn). An emptied bucket stays known, so that
        ``fill`` pulls entries for it too."""
        taken: list[Entry] = []
        for key, count in counts.items():
            queue = self.queues.pop(key)
            taken += [queue.popleft() for _ in range(count)]
            self.queues[key] = queue
            self.retries[key] = max(0, self.retries.get(key, 0) - count)
        self.count -= len(taken)
        self.bytes -= sum(entry.size for entry in taken)
        return taken

    def put_back(self, refused: list[Entry]) -> None:
        """Entries a call did not store, back at the front of their buckets (they were sent first)."""
        for entry in reversed(refused):
            key = self.bucket_of(entry)
            self.queues.setdefault(key, deque()).appendleft(entry)
            self.retries[key] = self.retries.get(key, 0) + 1
            self.count += 1
            self.bytes += entry.size


def prepare_client(client: Any) -> Any:
    """Teach ``client`` (a botocore Kinesis client; idempotent) the encoded-body shortcut (see the module doc)."""
    events = client.meta.events
    events.register("before-parameter-build.kinesis.PutRecords", _take_encoded_body, unique_id="encoded-body-take")
    events.register("before-call.kinesis.PutRecords", _swap_in_encoded_body, unique_id="encoded-body-swap")
    events.register("before-parse.kinesis.PutRecords", _keep_raw_answer, unique_id="encoded-body-answer")
    return client


def _take_encoded_body(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    """botocore's ``before-parameter-build`` hook: move our body out of the parameters before botocore validates
    them (it would refuse an unknown parameter) into the call's context."""
    _call.ours = ENCODED_BODY in params  # set on every PutRecords of this client: never stale
    if _call.ours:
        context[ENCODED_BODY] = params.pop(ENCODED_BODY)


def _swap_in_encoded_body(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    """botocore's ``before-call`` hook: the serialized request's body (the placeholder's) becomes ours, before
    the request is built and signed."""
    if ENCODED_BODY in context:
        params["body"] = context.pop(ENCODED_BODY)


def _keep_raw_answer(response_dict: dict[str, Any], customized_response_dict: dict[str, Any], **_: Any) -> None:
    """botocore's ``before-parse`` hook: the successful answer of a call with our body skips botocore's parser (an
    error answer keeps its body, so botocore still raises ClientError with the AWS error code)."""
    if getattr(_call, "ours", False) and response_dict.get("status_code") == 200:
        customized_response_dict[RAW_ANSWER] = response_dict["body"]
        response_dict["body"] = b"{}"


def default_bucket(entry: Entry) -> str:
    """The pacing bucket of an entry when the caller has no shard map: the shard an aggregate was planned for,
    else the stream."""
    return getattr(entry, "shard_id", "") or ANY_SHARD


def _put_pool(
    client,
    stream_name: str,
    pool: _Pool,
    retry: RetryPolicy,
    stats: PutStats,
    on_stored: OnStored | None,
    pacer: WritePacer,
) -> None:
    """Send the pool's entries as the pacer lets them through, the failed ones again, until all are stored or
    the budget is spent."""
    stalled_rounds = 0  # consecutive rounds in which no entry got through
    stalled_since = 0.0
    while True:
        pool.fill()
        if not pool:
            return
        sending = _paced(pool, retry, pacer, stats)
        sent_at = pacer.clock()
        outcome = _send(client, stream_name, sending, retry, stats, on_stored, pool.bucket_of)
        pacer.record(outcome.stored, outcome.throttled, sent_at)
        if outcome.permanent_codes:
            raise PutRecordsFailedError(
                stream_name, len(outcome.pending), outcome.permanent_codes, outcome.last_message, stats
            )
        pool.put_back(outcome.pending)
        if not outcome.pending:
            stalled_rounds = 0
            continue
        stalled_rounds = stalled_rounds + 1 if len(outcome.pending) == len(sending) else 0
        stalled_since = pacer.clock() if stalled_rounds == 1 else stalled_since
        full_second = bool(outcome.throttled) and not outcome.unexplained
        # A shard's full second is paid back within one: other writers' turns get as long as the policy's
        # backoff would have waited; other failures the policy's number of rounds.
        patient = full_second and pacer.clock() - stalled_since < _patience_s(retry)
        if stalled_rounds > retry.max_retries and not patient:
            stats.failed_entries += len(pool)
            raise PutRecordsFailedError(stream_name, len(pool), outcome.codes, outcome.last_message, stats)
        stats.retried_entries += len(outcome.pending)
        if not full_second:
            # Back off by how long nothing has moved (not by the round number), so steady partial failures
            # keep a short, jittered pause while a stuck shard backs off up to the policy's maximum.
            retry.sleep_before_retry(stalled_rounds)
        # A shard's full second: the pacer holds its entries back until the shard has room (pacing's doc).


def _patience_s(retry: RetryPolicy) -> float:
    """How long the policy's backoff waits at most through its retries: as long, shards that others keep full."""
    return sum(min(retry.max_interval_ms, retry.initial_interval_ms * 2**k) for k in range(retry.max_retries)) / 1000


def _paced(pool: _Pool, retry: RetryPolicy, pacer: WritePacer, stats: PutStats) -> list[Entry]:
    """The entries the shards have room for, out of the pool, after waiting (in ``retry``'s sleep, which a
    deadline may cut) until there is room for at least one."""
    while True:
        counts, wait_s = pacer.plan(pool.sendable(), MAX_ENTRIES_PER_CALL, MAX_BYTES_PER_CALL)
        if counts:
            return pool.take(counts)
        stats.paced_s += wait_s
        retry.sleep(wait_s)


def _send(
    client,
    stream_name: str,
    pending: list[Entry],
    retry: RetryPolicy,
    stats: PutStats,
    on_stored: OnStored | None,
    bucket_of: BucketOf = default_bucket,
) -> _Round:
    """One PutRecords call (whole-call failures retried by ``retry``); sorts the answer per entry."""

    def count_call_retry(attempt: int, exc: BaseException) -> None:
        stats.retried_calls += 1
        stats.calls += 1

    body = _BODY_ENCODER.encode({"StreamName": stream_name, "Records": [entry.to_request() for entry in pending]})
    try:
        answer = retry.call(
            client.put_records,
            StreamName=stream_name,
            Records=_PLACEHOLDER,
            **{ENCODED_BODY: body},
            what=f"PutRecords of {len(pending)} entries to stream '{stream_name}'",
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
    return _sort_answer(pending, _ANSWER.decode(answer[RAW_ANSWER]).Records, stats, on_stored, bucket_of)


def _sort_answer(
    pending: list[Entry],
    results: list[_PutResult],
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
