"""When to retry an AWS call, and how long to wait: one policy for the whole connector.

botocore's own retries are turned down in ``pyspark_aws_kinesis.aws`` so that every retry goes through here, bounded by
the user's ``kinesis.clientNumRetries`` / ``clientRetryIntervalsMs`` / ``clientMaxRetryIntervalMs`` options.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from botocore.exceptions import ClientError, HTTPClientError, IncompleteReadError
from botocore.exceptions import ConnectionError as BotocoreConnectionError

from .errors import KinesisConnectorError

T = TypeVar("T")

# Over a quota: waiting longer helps, asking again at once does not.
THROTTLING_ERROR_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "LimitExceededException",
        "ThrottlingException",
        "Throttling",
        "RequestLimitExceeded",
        "KMSThrottlingException",
        "SlowDown",
    }
)
# Error codes that mean "the same call may succeed later", whatever the HTTP status says: a quota, or a fault.
RETRYABLE_ERROR_CODES = THROTTLING_ERROR_CODES | frozenset(
    {
        "InternalFailure",
        "InternalServerError",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "RequestTimeout",
        "RequestTimeoutException",
        # S3: a concurrent conditional write of the same key is in flight (409); the retry meets its result.
        "ConditionalRequestConflict",
    }
)


def error_code(exc: BaseException) -> str:
    """The AWS error code of a ClientError, else the exception's class name."""
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", "Unknown"))
    return type(exc).__name__


def error_message(exc: BaseException) -> str:
    """The AWS error message of a ClientError, else the exception's text."""
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Message", ""))
    return str(exc)


def is_throttled(exc: BaseException) -> bool:
    """A quota refusal (``THROTTLING_ERROR_CODES``), also as the last error of exhausted retries."""
    if isinstance(exc, RetriesExhaustedError):
        exc = exc.last_error
    return isinstance(exc, ClientError) and error_code(exc) in THROTTLING_ERROR_CODES


# After a call refused for a shard's quota, the next call on the shard waits at least this long: the shard's 1 s
# window has passed by then, so the wait is never shorter than what Kinesis counts in.
QUOTA_BACKOFF_MIN_S = 1.0


def quota_backoff(previous_s: float, ceiling_s: float) -> float:
    """The wait before the next call on a shard whose last call was refused for its quota: double
    ``previous_s`` (the wait that was not enough), at least ``QUOTA_BACKOFF_MIN_S``, at most ``ceiling_s`` (never
    below the minimum). The probe and the polling reader both use it, so a shard is never asked sooner by one
    than by the other."""
    return min(max(2 * previous_s, QUOTA_BACKOFF_MIN_S), max(ceiling_s, QUOTA_BACKOFF_MIN_S))


def is_retryable(exc: BaseException) -> bool:
    """Throttling, 5xx answers, timeouts and dropped connections are worth another try; the rest is not."""
    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return error_code(exc) in RETRYABLE_ERROR_CODES or status >= 500
    # Refused, closed or timed-out connections; a cut-off body: incomplete read or parser error.
    # Imported here: a process that never calls AWS skips it (docs/source.md, "A light start per Python worker").
    from botocore.parsers import ResponseParserError

    return isinstance(exc, BotocoreConnectionError | HTTPClientError | IncompleteReadError | ResponseParserError)


def outcome_unknown(exc: BaseException) -> bool:
    """The call may have taken effect although it failed: no answer came (a read timeout, a connection closed
    or cut off mid-answer) or the service failed it (5xx). A refused or unreachable connection sent nothing, and
    a 4xx (a quota included) refused the call (docs/sink.md, "Delivery")."""
    if isinstance(exc, RetriesExhaustedError):
        exc = exc.last_error
    if isinstance(exc, ClientError):
        return exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) >= 500
    from botocore.parsers import ResponseParserError

    connected = isinstance(exc, HTTPClientError) and not isinstance(exc, BotocoreConnectionError)
    return connected or isinstance(exc, IncompleteReadError | ResponseParserError)


class RetriesExhaustedError(KinesisConnectorError, RuntimeError):
    """A retryable failure that persisted through every allowed attempt."""

    def __init__(self, what: str, attempts: int, last_error: BaseException):
        self.what = what
        self.attempts = attempts
        self.last_error = last_error
        last = f"{error_code(last_error)}: {last_error}"
        super().__init__(f"{what} failed after {attempts} attempts; last AWS error: {last}")


@dataclass(frozen=True)
class RetryPolicy:
    """Jittered exponential backoff: attempt n waits between half and all of min(max, initial * 2**n)."""

    max_retries: int = 3
    initial_interval_ms: int = 1000
    max_interval_ms: int = 10000

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if not 0 <= self.initial_interval_ms <= self.max_interval_ms:
            raise ValueError(
                f"retry intervals must satisfy 0 <= initial ({self.initial_interval_ms} ms) "
                f"<= max ({self.max_interval_ms} ms)"
            )

    def delay_s(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (0-based)."""
        ceiling_ms = min(self.max_interval_ms, self.initial_interval_ms * 2 ** min(attempt, 32))
        return random.uniform(ceiling_ms / 2, ceiling_ms) / 1000.0

    def sleep_before_retry(self, attempt: int) -> None:
        self.sleep(self.delay_s(attempt))

    def sleep(self, seconds: float) -> None:
        """Every wait of a retry goes through here (the generator's deadline cuts it short)."""
        time.sleep(seconds)

    def call(
        self,
        fn: Callable[..., T],
        *args,
        what: str,
        on_retry: Callable[[int, BaseException], None] | None = None,
        retry_throttled: bool = True,
        **kwargs,
    ) -> T:
        """Call ``fn(*args, **kwargs)``, retrying retryable errors up to ``max_retries`` times.

        ``what`` names the call in the error ("GetRecords on stream s shard shardId-0001"); ``on_retry`` is told
        of each retry (attempt number and error), for counting. ``retry_throttled=False``: a quota refusal is
        raised at once, for callers that back off on their own (the GetRecords reads and probes).
        """
        for attempt in range(self.max_retries + 1):
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                if not is_retryable(exc) or (not retry_throttled and is_throttled(exc)):
                    raise
                if attempt == self.max_retries:
                    raise RetriesExhaustedError(what, attempt + 1, exc) from exc
                if on_retry is not None:
                    on_retry(attempt, exc)
                self.sleep_before_retry(attempt)
        raise AssertionError("unreachable")  # the loop always returns or raises
