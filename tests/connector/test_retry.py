"""The retry policy: what it retries, how long it waits, and how it gives up."""

from __future__ import annotations

import pytest
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from pyspark_aws_kinesis.retry import RetriesExhaustedError, RetryPolicy, error_code, is_retryable, outcome_unknown


def _client_error(code: str, status: int = 400) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": f"{code} happened"}, "ResponseMetadata": {"HTTPStatusCode": status}},
        "GetRecords",
    )


@pytest.mark.parametrize(
    "exc",
    [
        _client_error("ProvisionedThroughputExceededException"),
        _client_error("LimitExceededException"),
        _client_error("SomethingNew", 503),
        EndpointConnectionError(endpoint_url="http://127.0.0.1:1"),
        ReadTimeoutError(endpoint_url="http://127.0.0.1:1"),
        ConnectionClosedError(endpoint_url="http://127.0.0.1:1"),
    ],
)
def test_transient_errors_are_retryable(exc: Exception) -> None:
    assert is_retryable(exc)


@pytest.mark.parametrize(
    "exc",
    [_client_error("ResourceNotFoundException"), _client_error("AccessDeniedException"), ValueError("bug")],
)
def test_permanent_errors_are_not_retryable(exc: Exception) -> None:
    assert not is_retryable(exc)


@pytest.mark.parametrize(
    ("exc", "unknown"),
    [
        (ReadTimeoutError(endpoint_url="http://127.0.0.1:1"), True),  # sent, no answer
        (ConnectionClosedError(endpoint_url="http://127.0.0.1:1"), True),
        (_client_error("InternalFailure", 500), True),
        (_client_error("ServiceUnavailable", 503), True),
        (RetriesExhaustedError("PutRecords", 3, ReadTimeoutError(endpoint_url="http://127.0.0.1:1")), True),
        (EndpointConnectionError(endpoint_url="http://127.0.0.1:1"), False),  # nothing sent
        (ConnectTimeoutError(endpoint_url="http://127.0.0.1:1"), False),
        (_client_error("ProvisionedThroughputExceededException"), False),  # refused
        (_client_error("ResourceNotFoundException"), False),
    ],
)
def test_outcome_unknown_only_when_the_call_may_have_taken_effect(exc: Exception, unknown: bool) -> None:
    assert outcome_unknown(exc) is unknown


def test_delays_grow_with_jitter_and_stay_under_the_cap() -> None:
    policy = RetryPolicy(max_retries=10, initial_interval_ms=100, max_interval_ms=1000)
    for attempt, ceiling in [(0, 0.1), (1, 0.2), (2, 0.4), (3, 0.8), (4, 1.0), (9, 1.0)]:
        delays = {policy.delay_s(attempt) for _ in range(50)}
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(delays) > 1  # jittered, not a fixed schedule


def test_call_retries_until_success_and_reports_each_retry() -> None:
    failures = [_client_error("ProvisionedThroughputExceededException")] * 2
    seen: list[int] = []

    def flaky() -> str:
        if failures:
            raise failures.pop()
        return "ok"

    policy = RetryPolicy(max_retries=3, initial_interval_ms=1, max_interval_ms=2)
    assert policy.call(flaky, what="GetRecords", on_retry=lambda n, e: seen.append(n)) == "ok"
    assert seen == [0, 1]


def test_call_gives_up_with_the_last_error_named() -> None:
    calls = []

    def always_throttled() -> None:
        calls.append(1)
        raise _client_error("ProvisionedThroughputExceededException")

    policy = RetryPolicy(max_retries=2, initial_interval_ms=1, max_interval_ms=2)
    with pytest.raises(RetriesExhaustedError, match="GetRecords on shardId-1 failed after 3 attempts") as info:
        policy.call(always_throttled, what="GetRecords on shardId-1")
    assert len(calls) == 3
    assert error_code(info.value.last_error) == "ProvisionedThroughputExceededException"
    assert "ProvisionedThroughputExceededException" in str(info.value)


def test_call_does_not_retry_permanent_errors() -> None:
    calls = []

    def missing() -> None:
        calls.append(1)
        raise _client_error("ResourceNotFoundException")

    with pytest.raises(ClientError):
        RetryPolicy(initial_interval_ms=1, max_interval_ms=1).call(missing, what="ListShards")
    assert calls == [1]


def test_invalid_intervals_are_rejected() -> None:
    with pytest.raises(ValueError, match="initial"):
        RetryPolicy(initial_interval_ms=500, max_interval_ms=100)
    with pytest.raises(ValueError, match="max_retries"):
        RetryPolicy(max_retries=-1)
