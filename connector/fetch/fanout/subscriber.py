"""The SubscribeToShard (enhanced fan-out) transport: one shard's records through one consumer, pushed, as
decoded Pages. Who calls it: the subscription broker's pump threads (``fanout.broker``: one ``ShardSubscriber`` per
consumer+shard, kept open across micro-batches) and ``fanout.client.BrokeredSubscriber`` when no broker can serve a
read (it then reads direct, in the task); the consumer was made ACTIVE on the driver by
``pyspark_aws_kinesis.consumers``. It implements ``fetch.range.ShardTransport`` with one ``Page`` per
SubscribeToShardEvent, empty ones included (the range sees the tip), whose ``next_iterator`` is the event's
ContinuationSequenceNumber (None: the shard has ended), and hides from its caller a subscription's 5-minute end,
Kinesis's rules on when to subscribe again (``SubscribePacer``), recoverable errors (``SubscriptionError`` once the
retries run out), a gone position or shard (raised as ``fetch.iterators`` does for GetShardIterator) and the event
stream's framing (``fanout.framing``); ``abort()`` ends a subscription from another thread. The behaviour and why:
docs/source.md, "Enhanced fan-out" and "What the source costs a shard".
"""

from __future__ import annotations

import logging
import math
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing, suppress
from dataclasses import replace
from typing import Any

import urllib3.exceptions
from botocore.exceptions import ClientError

from ...aws.clients import kinesis_client
from ...aws.settings import ClientSettings
from ...errors import KinesisConnectorError
from ...positions import AFTER_SEQUENCE_NUMBER, Position
from ...retry import RetryPolicy, error_code, error_message, is_retryable
from ..decode import Page, ShardContext, decode_subscribe_event
from ..iterators import (
    FUTURE_TIMESTAMP_PAUSE_S,
    FUTURE_TIMESTAMP_WAITS,
    classify_missing,
    is_future_timestamp,
    iterator_request,
)
from .framing import messages

log = logging.getLogger(__name__)

RAW_EVENT_STREAM = "RawEventStream"  # where a SubscribeToShard answer carries its unparsed body
# One event-stream message: ":message-type" = "event", ":event-type" = "initial-response", payload "{}".
INITIAL_RESPONSE = bytes.fromhex(
    "0000004700000035d9429f130d3a6d6573736167652d747970650700056576656e740b3a6576656e742d74797065070010"
    "696e697469616c2d726573706f6e73657b7d8de0c8a3"
)
_HOOK_ID = f"{__name__}.keep-raw-event-stream"
SUBSCRIBE_INTERVAL_S = 1.0  # Kinesis takes 1 SubscribeToShard per second per consumer and shard
IN_USE_S = 5.0  # and refuses one within 5 s of a success (ResourceInUseException)
IN_USE = "ResourceInUseException"
REFUSAL_CODES = frozenset({IN_USE, "LimitExceededException"})  # Kinesis's quota answers to SubscribeToShard
RECOVERABLE_CODES = REFUSAL_CODES


class SubscribePacer:
    """Keeps this process's SubscribeToShard calls of one consumer and shard within Kinesis's rules, whoever makes
    them (the broker's pump, a task reading direct, a resubscription after an error or the 5-minute end): at least
    ``interval_s`` apart (a faster call is refused with LimitExceededException), and none within ``in_use_s`` of
    the last success or of a ResourceInUseException (it would be refused with ResourceInUseException: the broker
    resubscribing where its buffer does not cover, the next batch's task after a direct read, a handover from
    another process that still held the shard). Process-wide: ``SUBSCRIBE_PACER``; another process has its own.
    It holds only the shards called within the last seconds (``_sweep``): a broker or a reused worker subscribes
    for months, and reshards retire shards that are never called again."""

    def __init__(
        self,
        interval_s: float = SUBSCRIBE_INTERVAL_S,
        in_use_s: float = IN_USE_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.interval_s = interval_s
        self.in_use_s = in_use_s
        self._clock = clock
        self._lock = threading.Lock()
        self._next: dict[tuple[str, str], float] = {}  # (consumer ARN, shard id) -> earliest next call (monotonic)
        self._swept_at = -math.inf  # when entries whose time had passed were last dropped

    def wait(self, consumer_arn: str, shard_id: str) -> float:
        """Call right before a SubscribeToShard: waits until the call may go, and books the next slot (so two
        threads asking at once go a second apart). Returns the seconds waited."""
        key = (consumer_arn, shard_id)
        with self._lock:
            now = self._clock()
            self._sweep(now)
            start = max(now, self._next.get(key, now))
            self._next[key] = start + self.interval_s
        if start > now:
            time.sleep(start - now)
        return max(0.0, start - now)

    def answered(self, consumer_arn: str, shard_id: str) -> None:
        """Call when the SubscribeToShard (booked by ``wait``) answered or failed: the next waits a second from
        now. Kinesis saw the call somewhere between its start and now, so a second from the start is not enough."""
        self._not_before(consumer_arn, shard_id, self.interval_s)

    def in_use(self, consumer_arn: str, shard_id: str) -> None:
        """Call when a SubscribeToShard succeeded, or was refused with ResourceInUseException: the next call waits
        ``in_use_s`` from now. After a success, Kinesis refuses the next within 5 s; after such a refusal, the
        success that caused it (somewhere else) was less than 5 s before, so 5 s from now is past its window."""
        self._not_before(consumer_arn, shard_id, self.in_use_s)

    def _not_before(self, consumer_arn: str, shard_id: str, delay_s: float) -> None:
        key = (consumer_arn, shard_id)
        with self._lock:
            self._next[key] = max(self._next.get(key, 0.0), self._clock() + delay_s)

    def _sweep(self, now: float) -> None:
        """Drop the entries whose time has passed (the lock held), at most once per the longer rule: such an entry
        says nothing more (a call may go at once either way), and one of a shard a reshard retired would stay."""
        if now - self._swept_at < max(self.interval_s, self.in_use_s):
            return
        self._next = {key: at for key, at in self._next.items() if at > now}
        self._swept_at = now


SUBSCRIBE_PACER = SubscribePacer()


class SubscriptionError(KinesisConnectorError, RuntimeError):
    """Subscribing to a shard kept failing; the message names the shard, the consumer and the last error."""


class EndedWithoutEventsError(KinesisConnectorError, ConnectionError):
    """A subscription's event stream ended before delivering any event (recoverable, but counted)."""


class _InitialResponseOnly:
    """What botocore parses in place of the real body: just an initial response (botocore waits for one, which AWS
    sends first and kinesis-mock never; ``_page`` skips the real one when there is one)."""

    def stream(self) -> Iterator[bytes]:
        yield INITIAL_RESPONSE

    def close(self) -> None:
        pass


def _keep_raw_event_stream(response_dict: dict[str, Any], customized_response_dict: dict[str, Any], **_: Any) -> None:
    """botocore's ``before-parse`` hook for SubscribeToShard: keep the real body (framed here, decoded by
    ``fetch.decode`` without botocore's per-record datetimes), let botocore parse a stand-in."""
    if response_dict.get("status_code") == 200:
        customized_response_dict[RAW_EVENT_STREAM] = response_dict["body"]
        response_dict["body"] = _InitialResponseOnly()


def subscription_client(settings: ClientSettings, timeout_s: float) -> Any:
    """The process's Kinesis client for subscriptions: its read timeout is ``kinesis.subscribeToShard.timeoutSec``
    (the longest silence tolerated between two events), and it carries the hook below."""
    return prepare_client(kinesis_client(replace(settings, read_timeout_s=timeout_s)))


def prepare_client(kinesis: Any) -> Any:
    """Install the hook on ``kinesis`` (a client from ``pyspark_aws_kinesis.aws``; idempotent) and return it."""
    kinesis.meta.events.register("before-parse.kinesis.SubscribeToShard", _keep_raw_event_stream, unique_id=_HOOK_ID)
    return kinesis


def starting_position(position: Position) -> dict[str, Any]:
    """SubscribeToShard's StartingPosition for ``position``: the same mapping as GetShardIterator's (AT/AFTER a
    user record inside a KPL aggregate re-read the whole record; the range reader skips what it already has)."""
    request = iterator_request(position)
    start: dict[str, Any] = {"Type": request["ShardIteratorType"]}
    if "StartingSequenceNumber" in request:
        start["SequenceNumber"] = request["StartingSequenceNumber"]
    if "Timestamp" in request:
        start["Timestamp"] = request["Timestamp"]
    return start


def is_recoverable(exc: BaseException) -> bool:
    """Worth a new subscription: throttling, a shard still subscribed, 5xx, timeouts, dropped connections."""
    if isinstance(exc, ClientError):
        return error_code(exc) in RECOVERABLE_CODES or is_retryable(exc)
    # urllib3 raises its own errors once the answer streams (read timeout, connection cut mid-chunk).
    return is_retryable(exc) or isinstance(exc, urllib3.exceptions.HTTPError | ConnectionError | TimeoutError)


def _event_error(headers: dict[str, Any], payload: bytes) -> ClientError:
    """An ``exception`` / ``error`` message of the event stream, as the ClientError botocore would raise."""
    code = headers.get(":exception-type") or headers.get(":error-code") or "Unknown"
    message = headers.get(":error-message") or payload.decode("utf-8", "replace")
    return ClientError({"Error": {"Code": code, "Message": message}}, "SubscribeToShard")


class ShardSubscriber:
    """Reads one shard through one consumer: ``for page in subscriber.pages(start): ...``.

    ``kinesis``: a client from ``pyspark_aws_kinesis.aws`` (its read timeout is the longest silence tolerated between
    two events: ``kinesis.subscribeToShard.timeoutSec``); ``retry``: backoff between failed subscriptions, its
    ``max_retries`` = ``kinesis.subscribeToShard.maxRetries``. After each page, ``continuation`` is the last
    ContinuationSequenceNumber; ``calls`` counts SubscribeToShard calls, ``resubscriptions`` those after the first,
    ``refused_calls`` (``refusals`` by code) those Kinesis refused for its quotas. ``pacer``: the process's
    ``SUBSCRIBE_PACER`` unless given.
    """

    def __init__(
        self,
        kinesis: Any,
        consumer_arn: str,
        context: ShardContext,
        retry: RetryPolicy,
        consumer_name: str | None = None,
        pacer: SubscribePacer | None = None,
    ):
        self.kinesis = prepare_client(kinesis)
        self.pacer = pacer or SUBSCRIBE_PACER  # another process's pacer only in tests of a handover
        self.consumer_arn = consumer_arn
        self.context = context
        self.retry = retry
        self.consumer_name = consumer_name or consumer_arn
        self.continuation: str | None = None
        self.calls = 0
        self.resubscriptions = 0
        self.refused_calls = 0  # calls Kinesis refused (REFUSAL_CODES): each waited out, never asked again at once
        self.refusals: dict[str, int] = {}  # the same, by error code
        self.paced_s = 0.0  # time spent waiting for the pacer (the 1 s and the 5 s rules)
        self._raw: Any = None  # the open event stream's HTTP answer, for abort()
        self._aborted = False

    @property
    def what(self) -> str:
        return f"{self.context.label} through consumer '{self.consumer_name}'"

    def pages(self, start: Position, wanted: Callable[[], int | None] | None = None) -> Iterator[Page]:
        """Pages from ``start`` until the shard's end (a page with ``next_iterator`` None), or until the caller
        stops iterating (the open event stream is then closed). ``wanted`` (``ShardTransport``'s sizing hint) is
        unused: Kinesis pushes what it has. Raises PositionGoneError / ShardGoneError when ``start`` is gone."""
        position, failures, future_waits = start, 0, 0
        while not self._aborted:
            delivered = False
            try:
                with closing(self._subscription(position)) as events:  # closes the stream when we stop early
                    for page in events:
                        delivered, failures = True, 0
                        self.continuation = page.next_iterator
                        yield page
                        if page.next_iterator is None:
                            return
                        position = Position(AFTER_SEQUENCE_NUMBER, page.next_iterator)
                if not delivered:  # a stream that keeps ending at once must not loop forever
                    raise EndedWithoutEventsError("the event stream ended before its first event")
                log.debug("subscription to %s ended; resubscribing after %s", self.what, self.continuation)
            except ClientError as exc:
                if is_future_timestamp(exc) and future_waits < FUTURE_TIMESTAMP_WAITS:
                    future_waits += 1  # the driver's clock is ahead of Kinesis': wait for Kinesis' to pass it
                    time.sleep(FUTURE_TIMESTAMP_PAUSE_S)
                    continue
                self._raise_if_gone(exc, position)
                self._before_retry(exc, failures)
                failures += 1
            except Exception as exc:
                if self._aborted:
                    return
                self._before_retry(exc, failures)
                failures += 1
            self.resubscriptions += 1

    @property
    def aborted(self) -> bool:
        """Whether ``abort()`` was called (``pages()`` then ends instead of resubscribing)."""
        return self._aborted

    def abort(self) -> None:
        """From another thread: end ``pages()`` now, even while it waits for an event (its socket is shut down,
        which wakes the blocked read; the generator then returns instead of resubscribing)."""
        self._aborted = True
        sock = getattr(getattr(self._raw, "connection", None), "sock", None)
        if sock is not None:
            with suppress(OSError):  # already closed
                sock.shutdown(socket.SHUT_RDWR)

    @staticmethod
    def _raise_if_gone(exc: ClientError, position: Position) -> None:
        """PositionGoneError / ShardGoneError for errors that say the position or shard is gone. A missing
        consumer is ResourceNotFoundException too, but not lost data: its message names the consumer."""
        if "consumer" in error_message(exc).lower():
            return
        gone = classify_missing(exc, position)
        if gone is not None:
            raise gone from exc

    def _before_retry(self, exc: Exception, failures: int) -> None:
        """Re-raise ``exc`` unless it is recoverable and retries remain; else wait: a refusal for Kinesis's quotas
        (counted) as long as the pacer says (1 s after LimitExceededException, 5 s after ResourceInUseException:
        asking sooner is refused again), anything else with jittered backoff."""
        code = error_code(exc)
        refused = isinstance(exc, ClientError) and code in REFUSAL_CODES
        if refused:
            self.refused_calls += 1
            self.refusals[code] = self.refusals.get(code, 0) + 1
            if code == IN_USE:  # also when another subscription took the shard over mid-stream
                self.pacer.in_use(self.consumer_arn, self.context.shard_id)
        if not is_recoverable(exc):
            raise exc
        if failures >= self.retry.max_retries:
            raise SubscriptionError(
                f"SubscribeToShard on {self.what} failed {failures + 1} times in a row; last error: {code}: {exc}"
            ) from exc
        log.info("subscription to %s: %s; retrying (%d)", self.what, code, failures + 1)
        if not refused:  # a refusal: the pacer waits before the next call
            self.retry.sleep_before_retry(failures)

    def _subscription(self, position: Position) -> Iterator[Page]:
        """One SubscribeToShard call's events as Pages; its stream is closed however iteration ends."""
        self.paced_s += self.pacer.wait(self.consumer_arn, self.context.shard_id)
        if self._aborted:  # closed while waiting (an idle subscription): no call for nobody
            return
        self.calls += 1
        try:
            answer = self.kinesis.subscribe_to_shard(
                ConsumerARN=self.consumer_arn,
                ShardId=self.context.shard_id,
                StartingPosition=starting_position(position),
            )
        finally:
            self.pacer.answered(self.consumer_arn, self.context.shard_id)
        self.pacer.in_use(self.consumer_arn, self.context.shard_id)  # a success: none within 5 s
        raw = self._raw = answer[RAW_EVENT_STREAM]
        try:
            for message in messages(raw.read):  # each message in one sized read: never copied chunk by chunk
                page = self._page(message.headers, message.payload)
                if page is not None:
                    yield page
        finally:
            release(raw)

    def _page(self, headers: dict[str, Any], payload: bytes) -> Page | None:
        kind = headers.get(":message-type")
        if kind in ("exception", "error"):
            raise _event_error(headers, payload)
        event = headers.get(":event-type")
        if event == "SubscribeToShardEvent":
            return decode_subscribe_event(payload, self.context)
        if event != "initial-response":  # AWS sends it first, kinesis-mock never: nothing in it for us
            log.debug("ignoring event %r on %s", event, self.what)
        return None


def release(raw: Any) -> None:
    """Close an event stream's HTTP answer and hand its (closed) connection back to the pool, which reopens it
    when next needed: a half-read stream can never be reused, and a connection kept out of the pool leaks
    (botocore's ``EventStream.close()`` is reported to leak it)."""
    try:
        raw.close()
    finally:
        raw.release_conn()
