"""Enhanced fan-out consumer lifecycle on kinesis-mock: register, reuse, registered meanwhile, the limits, a
consumer still DELETING, deregistration; and the ``python -m connector consumers`` command."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest
from efo_util import FAST, QUICK_WAIT, kinesis

from connector.consumers import (
    ACTIVE,
    ConsumerError,
    WaitPolicy,
    deregister_consumer,
    deregister_quietly,
    describe_consumer,
    ensure_consumer,
    list_consumers,
    stream_arn,
)
from connector.retry import RetryPolicy
from localaws import LocalServer, project_root
from localaws.fault_proxy import FaultProxy, Faults
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY

LOGGED_WAIT = WaitPolicy(timeout_s=30, poll_s=0.05, log_every_s=0)


def _names(server: LocalServer, stream: str) -> dict[str, str]:
    client = kinesis(server.endpoint_url)
    return {c.name: c.status for c in list_consumers(client, stream_arn(client, stream, FAST), FAST)}


def test_registers_when_absent_and_reuses_when_present(kinesis_mock: LocalServer, mock_stream) -> None:
    stream = mock_stream()
    with FaultProxy(kinesis_mock.endpoint_url) as proxy:
        client = kinesis(proxy.endpoint_url)
        first = ensure_consumer(client, stream, "app", FAST, QUICK_WAIT)
        again = ensure_consumer(client, stream, "app", FAST, QUICK_WAIT)
    assert first.status == again.status == ACTIVE and first.arn == again.arn
    assert proxy.calls["RegisterStreamConsumer"] == 1
    assert _names(kinesis_mock, stream) == {"app": ACTIVE}


def test_registered_meanwhile_means_reuse(kinesis_mock: LocalServer, mock_stream) -> None:
    """Our describe says absent, someone registers it first: RegisterStreamConsumer answers ResourceInUse."""
    stream = mock_stream()
    theirs = ensure_consumer(kinesis(kinesis_mock.endpoint_url), stream, "shared", FAST, QUICK_WAIT)
    # The proxy hides it from our first describe, as if it were registered just after that describe.
    faults = Faults(
        errors=(("ResourceNotFoundException", 1.0),), actions=frozenset({"DescribeStreamConsumer"}), max_faults=1
    )
    with FaultProxy(kinesis_mock.endpoint_url, faults) as proxy:
        ours = ensure_consumer(kinesis(proxy.endpoint_url), stream, "shared", FAST, QUICK_WAIT)
    assert proxy.stats["ResourceNotFoundException"] == 1 and proxy.calls["RegisterStreamConsumer"] == 1
    assert ours.arn == theirs.arn and ours.status == ACTIVE


def test_limit_exceeded_is_retried_then_named(kinesis_mock: LocalServer, mock_stream) -> None:
    stream = mock_stream()
    limited = frozenset({"RegisterStreamConsumer"})
    retry = RetryPolicy(max_retries=2, initial_interval_ms=1, max_interval_ms=2)
    with FaultProxy(kinesis_mock.endpoint_url, Faults(throttle_rate=1.0, actions=limited, max_faults=2)) as proxy:
        consumer = ensure_consumer(kinesis(proxy.endpoint_url), stream, "patient", retry, QUICK_WAIT)
    assert consumer.status == ACTIVE and proxy.stats["throttled"] == 2
    with (
        FaultProxy(kinesis_mock.endpoint_url, Faults(throttle_rate=1.0, actions=limited)) as proxy,
        pytest.raises(ConsumerError) as info,
    ):
        ensure_consumer(kinesis(proxy.endpoint_url), stream, "impatient", retry, QUICK_WAIT)
    assert proxy.calls["RegisterStreamConsumer"] == 3
    message = str(info.value)
    assert "LimitExceededException" in message and "5 consumers in CREATING" in message and "impatient" in message


def test_a_consumer_still_deleting_is_waited_out_then_registered_again(
    kinesis_mock: LocalServer, mock_stream, caplog: pytest.LogCaptureFixture
) -> None:
    """FLINK-37908: reusing a consumer that is being deleted fails later; wait until it is gone instead."""
    stream = mock_stream()
    direct = kinesis_mock.client("kinesis")
    old = ensure_consumer(kinesis(kinesis_mock.endpoint_url), stream, "restarted", FAST, QUICK_WAIT)
    direct.deregister_stream_consumer(ConsumerARN=old.arn)
    with caplog.at_level(logging.INFO, logger="connector.consumers"):
        new = ensure_consumer(kinesis(kinesis_mock.endpoint_url), stream, "restarted", FAST, LOGGED_WAIT)
    assert "is DELETING" in caplog.text
    assert new.status == ACTIVE
    now = describe_consumer(direct, stream_arn(direct, stream, FAST), "restarted", FAST)
    assert now is not None and (now.arn, now.status) == (new.arn, ACTIVE)


def test_waiting_for_active_is_bounded(kinesis_mock: LocalServer, mock_stream) -> None:
    stream = mock_stream()
    with pytest.raises(ConsumerError, match=r"'slow' of stream .* is still CREATING after \d+ s"):
        ensure_consumer(kinesis(kinesis_mock.endpoint_url), stream, "slow", FAST, WaitPolicy(timeout_s=0, poll_s=0))


def test_deregistration(kinesis_mock: LocalServer, mock_stream, caplog: pytest.LogCaptureFixture) -> None:
    stream = mock_stream()
    client = kinesis(kinesis_mock.endpoint_url)
    ensure_consumer(client, stream, "done", FAST, QUICK_WAIT)
    assert deregister_consumer(client, stream, "done", FAST, QUICK_WAIT) is True
    assert describe_consumer(client, stream_arn(client, stream, FAST), "done", FAST) is None
    assert deregister_consumer(client, stream, "done", FAST) is False
    with caplog.at_level(logging.INFO, logger="connector.consumers"):
        assert deregister_quietly(client, stream, "done", FAST) is False
        assert deregister_quietly(client, "no-such-stream", "done", FAST) is False  # logged, never raised
    assert "already gone" in caplog.text
    assert "python -m connector consumers deregister --stream no-such-stream --name done" in caplog.text


# -- the command -----------------------------------------------------------------------------------------------


def _cli(server: LocalServer, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": DUMMY_ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": DUMMY_SECRET_KEY,
        "PYTHONPATH": str(project_root()),
    }
    command = [sys.executable, "-m", "connector", "consumers", *args, "--endpoint-url", server.endpoint_url]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, cwd=project_root())


@pytest.mark.slow
def test_cli_lists_registers_and_deregisters(kinesis_mock: LocalServer, mock_stream) -> None:
    stream = mock_stream()
    empty = _cli(kinesis_mock, "list", "--stream", stream)
    assert (empty.returncode, empty.stdout.strip()) == (0, f"stream '{stream}' has no enhanced fan-out consumers")
    registered = _cli(kinesis_mock, "register", "--stream", stream, "--name", "by-hand")
    assert registered.returncode == 0, registered.stderr
    name, status, arn = registered.stdout.strip().split("\t")
    assert (name, status) == ("by-hand", ACTIVE) and f"stream/{stream}/consumer/by-hand:" in arn
    listed = _cli(kinesis_mock, "list", "--stream", stream)
    assert listed.returncode == 0 and listed.stdout.startswith(f"by-hand\t{ACTIVE}\t") and arn in listed.stdout
    gone = _cli(kinesis_mock, "deregister", "--stream", stream, "--name", "by-hand")
    assert (gone.returncode, gone.stdout.strip()) == (0, f"deregistered consumer 'by-hand' of stream '{stream}'")
    assert _names(kinesis_mock, stream) == {}
    again = _cli(kinesis_mock, "deregister", "--stream", stream, "--name", "by-hand")
    assert again.returncode == 3 and "no consumer named 'by-hand'" in again.stderr


def test_cli_errors(kinesis_mock: LocalServer) -> None:
    usage = _cli(kinesis_mock, "register", "--stream", "s")
    assert usage.returncode == 2 and "consumers register needs --name" in usage.stderr
    missing = _cli(kinesis_mock, "list", "--stream", "no-such-stream")
    assert missing.returncode == 1 and "ResourceNotFoundException" in missing.stderr
