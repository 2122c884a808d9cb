"""Enhanced fan-out consumers of a stream: describe, register or reuse, wait until ACTIVE, deregister.

Who calls it: the driver's planner once per query start with ``kinesis.consumerType=SubscribeToShard``, through
``QueryConsumers`` (``ensure_consumer`` for each stream, the ARNs then travel to executors in the partitions;
``deregister_quietly`` when the query ends and ``kinesis.requireConsumerDeregistration`` is true) and the
clean-up command ``python -m pyspark_aws_kinesis consumers ...`` (``pyspark_aws_kinesis.__main__``). The states
``ensure_consumer`` loops through (a DELETING consumer waited out, a refused registration waited out within AWS's
limits): docs/source.md, "Consumer lifecycle".
"""

from __future__ import annotations

import atexit
import logging
import pickle
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, BinaryIO

from botocore.exceptions import ClientError

from .aws.clients import kinesis_client
from .aws.settings import ClientSettings
from .detached import spawn_detached
from .errors import KinesisConnectorError
from .private import private_log, user_temp_path
from .retry import RetryPolicy, error_code, error_message
from .stream_ids import is_arn

log = logging.getLogger(__name__)

ACTIVE, CREATING, DELETING = "ACTIVE", "CREATING", "DELETING"
LIMIT_EXCEEDED = "LimitExceededException"
ACCESS_DENIED = "AccessDeniedException"
REGISTER_BACKOFF_S = 0.5  # the first wait after a refused registration (RegisterStreamConsumer: 5 a second)
REGISTER_MAX_BACKOFF_S = 8.0
REGISTER_LIMITS = (
    "RegisterStreamConsumer allows 5 calls per second per account and at most 5 consumers in CREATING status "
    "per account at once; a stream takes 20 consumers (50 on an account with On-demand Advantage)"
)


class ConsumerError(KinesisConnectorError, RuntimeError):
    """A consumer could not be made ACTIVE, or deregistered, in time; the message says which and why."""


@dataclass(frozen=True)
class Consumer:
    """One registered consumer of a stream, as DescribeStreamConsumer / ListStreamConsumers report it."""

    name: str
    arn: str
    status: str
    created: datetime | None = None

    @classmethod
    def from_answer(cls, answer: dict[str, Any]) -> Consumer:
        return cls(
            answer["ConsumerName"],
            answer["ConsumerARN"],
            answer["ConsumerStatus"],
            answer.get("ConsumerCreationTimestamp"),
        )


@dataclass(frozen=True)
class WaitPolicy:
    """How long ``ensure_consumer`` waits for a status change, how often it looks, how often it logs."""

    timeout_s: float = 300.0  # AWS documents CREATING and DELETING as taking seconds, rarely minutes
    poll_s: float = 1.0  # DescribeStreamConsumer allows 20 calls per second per stream
    log_every_s: float = 10.0


def stream_arn(kinesis: Any, stream: str, retry: RetryPolicy) -> str:
    """The stream's ARN (consumers are addressed by it): ``stream`` itself when given by ARN."""
    if is_arn(stream):
        return stream
    answer = retry.call(kinesis.describe_stream_summary, StreamName=stream, what=f"DescribeStreamSummary of {stream}")
    return answer["StreamDescriptionSummary"]["StreamARN"]


def _on_consumer(call: Callable[..., Any], arn: str, name: str, retry: RetryPolicy, what: str) -> Any | None:
    """``call(StreamARN=arn, ConsumerName=name)``, retried; None when there is no such consumer."""
    try:
        return retry.call(call, StreamARN=arn, ConsumerName=name, what=f"{what} {name} of {arn}")
    except ClientError as exc:
        if error_code(exc) == "ResourceNotFoundException":
            return None
        raise


def describe_consumer(kinesis: Any, arn: str, name: str, retry: RetryPolicy) -> Consumer | None:
    """The consumer called ``name`` on the stream ``arn``, or None when there is none."""
    answer = _on_consumer(kinesis.describe_stream_consumer, arn, name, retry, "DescribeStreamConsumer")
    return None if answer is None else Consumer.from_answer(answer["ConsumerDescription"])


def list_consumers(kinesis: Any, arn: str, retry: RetryPolicy) -> list[Consumer]:
    """Every consumer of the stream ``arn``, by name. Stops when a page repeats or adds nothing (kinesis-mock
    answers a NextToken even on the last page)."""
    found: dict[str, Consumer] = {}
    token: str | None = None
    seen: set[str] = set()
    while True:
        request: dict[str, Any] = {"StreamARN": arn, **({"NextToken": token} if token else {})}
        answer = retry.call(kinesis.list_stream_consumers, what=f"ListStreamConsumers of {arn}", **request)
        before = len(found)
        for item in answer.get("Consumers", []):
            consumer = Consumer.from_answer(item)
            found[consumer.name] = consumer
        token = answer.get("NextToken")
        if not token or token in seen or len(found) == before:
            return sorted(found.values(), key=lambda consumer: consumer.name)
        seen.add(token)


def ensure_consumer(
    kinesis: Any,
    stream: str,
    name: str,
    retry: RetryPolicy,
    wait: WaitPolicy = WaitPolicy(),
    refused: Counter[str] | None = None,
) -> Consumer:
    """The ACTIVE consumer ``name`` of ``stream``: reused when it exists, else registered, then waited for.

    A RegisterStreamConsumer refused with LimitExceededException (5 calls a second per account, or 5 consumers of
    the account CREATING: many queries or streams starting at once) is waited out with jittered backoff (0.5 s,
    doubling up to 8 s) for as long as ``wait.timeout_s``, counted in ``refused[stream]`` and logged. Raises
    ConsumerError when it is not ACTIVE within ``wait.timeout_s``, or still refused then.
    """
    arn = stream_arn(kinesis, stream, retry)
    what = f"enhanced fan-out consumer '{name}' of stream '{stream}'"
    started = time.monotonic()
    logged = started
    registered = False
    limited = 0  # registrations refused in a row for the account's limits
    while True:
        consumer = _describe_or_refuse(kinesis, arn, name, retry, what)
        if consumer is None:
            try:
                consumer = _register(kinesis, arn, name, retry, what)
                registered, limited = registered or consumer is not None, 0
            except ClientError as exc:
                if error_code(exc) == ACCESS_DENIED:
                    raise _denied(what, "RegisterStreamConsumer", exc) from exc
                if error_code(exc) != LIMIT_EXCEEDED:
                    raise
                limited += 1
                if refused is not None:
                    refused[stream] += 1
                _wait_out_limit(what, limited, exc, time.monotonic() - started, wait)
                continue
        if consumer is not None and consumer.status == ACTIVE:
            log.info("%s is ACTIVE (%s, %s)", what, consumer.arn, "registered" if registered else "reused")
            return consumer
        waited = time.monotonic() - started
        status = consumer.status if consumer else "absent (registered meanwhile elsewhere?)"
        if waited >= wait.timeout_s:
            raise ConsumerError(
                f"{what} is still {status} after {waited:.0f} s; giving up (is another job deleting or creating it? "
                "`python -m pyspark_aws_kinesis consumers list` shows the stream's consumers)"
            )
        if time.monotonic() - logged >= wait.log_every_s:
            log.info("%s is %s; waited %.0f s of at most %.0f s", what, status, waited, wait.timeout_s)
            logged = time.monotonic()
        time.sleep(wait.poll_s)


def _describe_or_refuse(kinesis: Any, arn: str, name: str, retry: RetryPolicy, what: str) -> Consumer | None:
    try:
        return describe_consumer(kinesis, arn, name, retry)
    except ClientError as exc:
        if error_code(exc) == ACCESS_DENIED:
            raise _denied(what, "DescribeStreamConsumer", exc) from exc
        raise


def _denied(what: str, action: str, exc: ClientError) -> ConsumerError:
    """The one line for a consumer call refused, with the way a stream of another account shares its consumers."""
    return ConsumerError(
        f"{action} of the {what} was refused (AccessDeniedException: {error_message(exc)}). On a stream of "
        "another account, its owner registers the consumer and shares it by the consumer's own resource policy "
        "(kinesis:DescribeStreamConsumer, kinesis:SubscribeToShard); name that consumer with "
        'kinesis.consumerNamePrefix + kinesis.consumerName (docs/source.md, "Streams of another account")'
    )


def _wait_out_limit(what: str, limited: int, exc: ClientError, waited: float, wait: WaitPolicy) -> None:
    """After the ``limited``-th refusal in a row of registering ``what``: sleep (jittered, 0.5 s doubling up to
    8 s, never past ``wait.timeout_s``), or raise ConsumerError once ``wait.timeout_s`` has passed."""
    if waited >= wait.timeout_s:
        raise ConsumerError(
            f"registering the {what} was still refused with LimitExceededException after {limited} attempts over "
            f"{waited:.0f} s ({error_message(exc)}): {REGISTER_LIMITS}. Wait for other consumers to become ACTIVE, "
            "start fewer queries at once, or deregister unused ones (`python -m pyspark_aws_kinesis consumers "
            "list|deregister`)."
        ) from exc
    delay = min(REGISTER_MAX_BACKOFF_S, REGISTER_BACKOFF_S * 2 ** min(limited - 1, 8)) * random.uniform(0.5, 1.0)
    delay = min(delay, max(0.0, wait.timeout_s - waited))
    log.warning(
        "registering the %s: LimitExceededException (%d in a row; %s); waiting %.1f s",
        what,
        limited,
        error_message(exc),
        delay,
    )
    time.sleep(delay)


def _register(kinesis: Any, arn: str, name: str, retry: RetryPolicy, what: str) -> Consumer | None:
    """Register ``name``; None when it appeared meanwhile (ResourceInUseException: describe again). A
    LimitExceededException is raised at once (the caller waits it out); other retryable errors are retried."""
    try:
        answer = retry.call(
            kinesis.register_stream_consumer,
            StreamARN=arn,
            ConsumerName=name,
            what=f"RegisterStreamConsumer of the {what}",
            on_retry=_log_retry(what),
            retry_throttled=False,
        )
    except ClientError as exc:
        if error_code(exc) == "ResourceInUseException":
            log.info("%s: registered meanwhile or still being deleted (%s); looking again", what, exc)
            return None
        raise
    consumer = Consumer.from_answer(answer["Consumer"])
    log.info("registered the %s (%s), now %s", what, consumer.arn, consumer.status)
    return consumer


def _log_retry(what: str) -> Callable[[int, BaseException], None]:
    def on_retry(attempt: int, exc: BaseException) -> None:
        log.warning("registering the %s: %s (retry %d)", what, error_code(exc), attempt + 1)

    return on_retry


def deregister_consumer(
    kinesis: Any, stream: str, name: str, retry: RetryPolicy, wait: WaitPolicy | None = None
) -> bool:
    """Deregister ``name`` from ``stream``; False when there was no such consumer. With ``wait``, return only
    once it is gone (raises ConsumerError when it is still DELETING after ``wait.timeout_s``)."""
    arn = stream_arn(kinesis, stream, retry)
    if _on_consumer(kinesis.deregister_stream_consumer, arn, name, retry, "DeregisterStreamConsumer") is None:
        return False
    log.info("deregistered the enhanced fan-out consumer '%s' of stream '%s'", name, stream)
    if wait is not None:
        deadline = time.monotonic() + wait.timeout_s
        while (consumer := describe_consumer(kinesis, arn, name, retry)) is not None:
            if time.monotonic() >= deadline:
                raise ConsumerError(
                    f"consumer '{name}' of stream '{stream}' is still {consumer.status} {wait.timeout_s:.0f} s after "
                    "deregistering"
                )
            time.sleep(wait.poll_s)
    return True


def deregister_quietly(kinesis: Any, stream: str, name: str, retry: RetryPolicy) -> bool:
    """Best-effort deregistration when a query ends: never raises, logs what happened either way."""
    try:
        found = deregister_consumer(kinesis, stream, name, retry)
    except Exception as exc:  # the query is ending anyway: say so, and how to clean up by hand
        log.warning(
            "could not deregister the enhanced fan-out consumer '%s' of stream '%s' (%s: %s); it keeps costing "
            "money until removed: python -m pyspark_aws_kinesis consumers deregister --stream %s --name %s",
            name,
            stream,
            error_code(exc),
            exc,
            stream,
            name,
        )
        return False
    if not found:
        log.info("enhanced fan-out consumer '%s' of stream '%s' was already gone", name, stream)
    return found


class QueryConsumers:
    """One query's enhanced fan-out consumers (one per stream, same name), on the driver.

    ``arns()`` makes them ACTIVE the first time it is called (the planner calls it when the query starts, or on
    its first batch after a restart) and returns ``{stream: consumer ARN}`` from then on: executors get the ARNs in
    their partitions, so they never describe consumers (DescribeStreamConsumer allows 20 calls/s per stream).

    With ``deregister`` (``kinesis.requireConsumerDeregistration``), ``release()`` deregisters them, once, best
    effort and logged. Spark rarely calls the reader's ``stop()``: it ends the driver's Python process, often with
    SIGKILL. So before registering, a watcher process is started (``python -m pyspark_aws_kinesis.consumers``, its own
    session) that holds a pipe from this process: when the pipe closes without a word (this process died, however)
    it deregisters the consumers; ``release()`` tells it "done" instead. ``atexit`` covers a normal exit too.
    """

    def __init__(self, settings: ClientSettings, streams: tuple[str, ...], name: str, deregister: bool):
        self.settings = settings
        self.streams = streams
        self.name = name
        self.deregister = deregister
        self.wait = WaitPolicy()
        self._arns: dict[str, str] | None = None
        self.refused: Counter[str] = Counter()  # RegisterStreamConsumer refused (LimitExceeded), per stream
        self._watcher: subprocess.Popen | None = None  # deregisters when this process dies
        self._lock = threading.Lock()

    def arns(self) -> dict[str, str]:
        """``{stream: ARN}`` of the query's ACTIVE consumers (registered or reused the first time)."""
        with self._lock:
            if self._arns is None:
                if self.deregister and self._watcher is None:
                    self._watcher = _start_watcher(self.settings, self.streams, self.name)
                    atexit.register(self.release)
                kinesis = kinesis_client(self.settings)
                retry = self.settings.retry
                self._arns = {
                    s: ensure_consumer(kinesis, s, self.name, retry, self.wait, self.refused).arn for s in self.streams
                }
                if self.refused:
                    log.warning(
                        "enhanced fan-out consumers '%s' ACTIVE after %d refused registrations (LimitExceededException:"
                        " %s): %s",
                        self.name,
                        sum(self.refused.values()),
                        REGISTER_LIMITS,
                        dict(self.refused),
                    )
            return dict(self._arns)

    def release(self) -> None:
        """Deregister the consumers when ``deregister`` (once; never raises)."""
        with self._lock:
            watcher, self._watcher = self._watcher, None
            if watcher is None:
                return
            _deregister_all(self.settings, self.streams, self.name)
            atexit.unregister(self.release)
            try:
                assert watcher.stdin is not None
                watcher.stdin.write(DONE)
                watcher.stdin.close()
            except OSError:  # it died: nothing to tell
                pass


DONE = b"done\n"
WATCHER_DIR = "aws-kinesis-consumers"  # <temp dir>/aws-kinesis-consumers-<uid>/watcher.log: this user's alone
WATCHER_LOG = "watcher.log"


def _deregister_all(settings: ClientSettings, streams: tuple[str, ...], name: str) -> None:
    kinesis = kinesis_client(settings)
    for stream in streams:
        deregister_quietly(kinesis, stream, name, settings.retry)


def _start_watcher(settings: ClientSettings, streams: tuple[str, ...], name: str) -> subprocess.Popen:
    """``python -m pyspark_aws_kinesis.consumers`` in its own session (a kill of this process group spares it), fed the
    consumers to deregister through its stdin, which stays open for as long as this process lives."""
    # Not this process's stdout/stderr (Spark may wait for their end): the watcher logs to its own file.
    watcher = spawn_detached(__name__, stdin=subprocess.PIPE)  # this module, whatever its package is called
    assert watcher.stdin is not None
    message = pickle.dumps((settings, streams, name))
    watcher.stdin.write(len(message).to_bytes(8, "big") + message)
    watcher.stdin.flush()
    return watcher


def _watch(pipe: BinaryIO) -> None:
    """The watcher: read what to deregister, wait for the pipe to close, deregister unless told "done"."""
    size = int.from_bytes(pipe.read(8), "big")
    settings, streams, name = pickle.loads(pipe.read(size))  # from our own parent process only
    if pipe.read() != DONE:
        _log_to_private_file()
        log.info("the driver that registered consumer '%s' ended without releasing it: deregistering", name)
        _deregister_all(settings, streams, name)


def _log_to_private_file() -> None:
    """Log to ``watcher.log`` in this user's private directory (created 0700, never through a link). When that
    directory is not ours or cannot be written, log nowhere: the consumers are deregistered all the same."""
    try:
        handler: logging.Handler = private_log(user_temp_path(WATCHER_DIR), WATCHER_LOG)
    except OSError:
        logging.basicConfig(handlers=[logging.NullHandler()])
        return
    logging.basicConfig(handlers=[handler], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")


if __name__ == "__main__":
    _watch(sys.stdin.buffer)
