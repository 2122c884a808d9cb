"""Enhanced fan-out consumer lifecycle on kinesis-mock: register, reuse, registered meanwhile, the limits, a
consumer still DELETING, deregistration; and the ``python -m pyspark_aws_kinesis consumers`` command."""

from __future__ import annotations

import logging
import socket
import subprocess
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from localaws import LocalAws, LocalServer
from localaws.fault_proxy import FaultProxy, Faults
from localaws.servers import kinesis_mock_taking
from localaws.streams import create_stream, unique_name
from pyspark_aws_kinesis.__main__ import CREDENTIALS_HINT
from pyspark_aws_kinesis.consumers import (
    ACTIVE,
    ConsumerError,
    WaitPolicy,
    deregister_consumer,
    deregister_quietly,
    describe_consumer,
    ensure_consumer,
    stream_arn,
)
from pyspark_aws_kinesis.retry import RetryPolicy
from tests.connector.support.consumers_util import _cli, _names
from tests.connector.support.efo_util import FAST, QUICK_WAIT, kinesis

LOGGED_WAIT = WaitPolicy(timeout_s=30, poll_s=0.05, log_every_s=0)


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


def test_limit_exceeded_is_waited_out_counted_then_named(kinesis_mock: LocalServer, mock_stream) -> None:
    stream = mock_stream()
    limited = frozenset({"RegisterStreamConsumer"})
    retry = RetryPolicy(max_retries=0, initial_interval_ms=1, max_interval_ms=2)  # the waiting is not retry's
    refused: Counter[str] = Counter()
    with FaultProxy(kinesis_mock.endpoint_url, Faults(throttle_rate=1.0, actions=limited, max_faults=2)) as proxy:
        consumer = ensure_consumer(kinesis(proxy.endpoint_url), stream, "patient", retry, QUICK_WAIT, refused)
    assert consumer.status == ACTIVE and proxy.stats["throttled"] == 2 and refused == {stream: 2}
    with (
        FaultProxy(kinesis_mock.endpoint_url, Faults(throttle_rate=1.0, actions=limited)) as proxy,
        pytest.raises(ConsumerError) as info,
    ):
        ensure_consumer(kinesis(proxy.endpoint_url), stream, "impatient", retry, WaitPolicy(timeout_s=1.5), refused)
    assert proxy.calls["RegisterStreamConsumer"] == refused[stream] - 2 >= 2  # backed off, not busy
    message = str(info.value)
    assert "LimitExceededException" in message and "5 consumers in CREATING" in message and "impatient" in message


STREAMS_AT_ONCE = 8
# Consumers stay CREATING for seconds on this test's own server (100 ms on the shared one), so that 8 registered at
# once are more than the account's 5 CREATING however loaded the machine.
CREATING_S = 4
SLOW_CREATES = kinesis_mock_taking(REGISTER_STREAM_CONSUMER_DURATION=f"{CREATING_S}s")


class RegisteringTogether:
    """A Kinesis client whose first RegisterStreamConsumer of each thread waits for all ``parties`` threads':
    the lookups before it take seconds apart on a loaded machine, which would spread the registrations out."""

    def __init__(self, client: Any, parties: int) -> None:
        self._client, self._barrier, self._seen = client, threading.Barrier(parties, timeout=60), threading.local()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def register_stream_consumer(self, **kwargs: Any) -> Any:
        if not getattr(self._seen, "registered", False):
            self._seen.registered = True
            self._barrier.wait()
        return self._client.register_stream_consumer(**kwargs)


@pytest.mark.slow
def test_many_streams_starting_at_once_all_get_active_consumers_within_the_account_limits(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """8 streams' consumers registered at once (a query on 8 streams, or 8 queries starting together) behind AWS's
    RegisterStreamConsumer limits (5 calls a second and 5 CREATING per account): the refusals are waited out, not
    retried at once nor fatal, and counted as the proxy counted them."""
    with LocalAws([SLOW_CREATES], log_dir=tmp_path, quotas=True) as aws:
        direct = aws.kinesis_mock.direct.client("kinesis")
        streams = [create_stream(direct, unique_name("many"), 1) for _ in range(STREAMS_AT_ONCE)]
        client = RegisteringTogether(kinesis(aws.kinesis_mock.endpoint_url), STREAMS_AT_ONCE)
        refused: Counter[str] = Counter()
        no_retries = RetryPolicy(max_retries=0, initial_interval_ms=1, max_interval_ms=1)
        began = time.monotonic()
        with (
            caplog.at_level(logging.WARNING, logger="pyspark_aws_kinesis.consumers"),
            ThreadPoolExecutor(STREAMS_AT_ONCE) as pool,
        ):
            consumers = list(
                pool.map(lambda s: ensure_consumer(client, s, "many", no_retries, QUICK_WAIT, refused), streams)
            )
        took_s = time.monotonic() - began
        assert [c.status for c in consumers] == [ACTIVE] * STREAMS_AT_ONCE
        tally = aws.kinesis_mock.quota_proxy.report().tally(action="RegisterStreamConsumer")
        assert tally.refused == sum(refused.values()), f"{tally.refused} refused by the proxy, {refused} counted"
        assert tally.refused >= STREAMS_AT_ONCE - 5, f"{tally.refused} refused in {took_s:.1f} s"
        assert tally.calls - tally.refused == STREAMS_AT_ONCE
        assert caplog.text.count("LimitExceededException") == sum(refused.values())


# A deregistered consumer stays DELETING for 500 ms on the shared kinesis-mock, which a loaded machine's round trips
# before the look can outlast: this test's own server keeps it DELETING for seconds (kinesis-mock 0.6.2 reads that
# time from START_STREAM_ENCRYPTION_DURATION, not DEREGISTER_STREAM_CONSUMER_DURATION: measured).
DELETING_S = 3
SLOW_DELETES = kinesis_mock_taking(START_STREAM_ENCRYPTION_DURATION=f"{DELETING_S}s")


@pytest.mark.slow
def test_a_consumer_still_deleting_is_waited_out_then_registered_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """FLINK-37908: reusing a consumer that is being deleted fails later; wait until it is gone instead."""
    with LocalAws([SLOW_DELETES], log_dir=tmp_path) as aws:
        direct = aws.kinesis_mock.client("kinesis")
        stream = create_stream(direct, unique_name("deleting"), 1)
        old = ensure_consumer(kinesis(aws.kinesis_mock.endpoint_url), stream, "restarted", FAST, QUICK_WAIT)
        direct.deregister_stream_consumer(ConsumerARN=old.arn)
        deregistered = time.monotonic()
        with caplog.at_level(logging.INFO, logger="pyspark_aws_kinesis.consumers"):
            new = ensure_consumer(kinesis(aws.kinesis_mock.endpoint_url), stream, "restarted", FAST, LOGGED_WAIT)
        took_s = time.monotonic() - deregistered
        assert "is DELETING" in caplog.text, f"not seen DELETING in {took_s:.1f} s; it lasts {DELETING_S} s"
        assert new.status == ACTIVE and took_s >= DELETING_S - 0.5  # waited it out
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
    with caplog.at_level(logging.INFO, logger="pyspark_aws_kinesis.consumers"):
        assert deregister_quietly(client, stream, "done", FAST) is False
        assert deregister_quietly(client, "no-such-stream", "done", FAST) is False  # logged, never raised
    assert "already gone" in caplog.text
    assert "python -m pyspark_aws_kinesis consumers deregister --stream no-such-stream --name done" in caplog.text


# -- the command -----------------------------------------------------------------------------------------------


def _one_line(result: subprocess.CompletedProcess, code: int) -> str:
    """The single stderr line of a run that must exit ``code`` with nothing on stdout."""
    assert (result.returncode, result.stdout) == (code, ""), (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


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
    assert usage.returncode == 2 and "--name: missing; consumers register needs the consumer's name" in usage.stderr
    missing = _one_line(_cli(kinesis_mock, "list", "--stream", "no-such-stream"), 2)
    assert missing.startswith("error: --stream 'no-such-stream': no such stream at --endpoint-url "), missing
    assert missing.endswith("`aws kinesis list-streams` lists them"), missing


def test_cli_without_credentials_is_one_line(kinesis_mock: LocalServer) -> None:
    line = _one_line(_cli(kinesis_mock, "list", "--stream", "s", keys=False), 4)
    assert line == f"error: no AWS credentials found: {CREDENTIALS_HINT}"


@pytest.mark.parametrize("region", [[], ["--region", "us-east-1"]])
def test_cli_unknown_profile_is_named(kinesis_mock: LocalServer, region: list[str]) -> None:
    line = _one_line(_cli(kinesis_mock, "list", "--stream", "s", *region, keys=False, AWS_PROFILE="dev"), 2)
    assert line.startswith("error: AWS_PROFILE 'dev': no such profile in the AWS config files"), line


def test_cli_unreachable_endpoint_is_one_line() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    result = _cli(None, "list", "--stream", "s", "--endpoint-url", url)
    line = _one_line(result, 4)
    assert line.startswith(f"error: --endpoint-url {url} could not be reached ("), line
    assert line.endswith("check --endpoint-url, --region and the network"), line


def test_cli_misspelled_region_is_named_before_any_call() -> None:
    """No endpoint and no server: the region check needs no network."""
    line = _one_line(_cli(None, "list", "--stream", "s", "--region", "us-eest-1"), 2)
    assert line.startswith("error: --region 'us-eest-1': not a region where AWS has kinesis (did you mean "), line
    assert "'us-east-1'" in line and line.endswith("add --allow-unknown-region"), line


def test_cli_allow_unknown_region_lets_a_new_region_through(kinesis_mock: LocalServer, mock_stream) -> None:
    """With the flag, the call is made (here against the local server, which takes any region); without, not."""
    stream = mock_stream()
    refused = _one_line(_cli(kinesis_mock, "list", "--stream", stream, "--region", "xx-newregion-1"), 2)
    assert refused.startswith("error: --region 'xx-newregion-1': not a region where AWS has kinesis"), refused
    done = _cli(kinesis_mock, "list", "--stream", stream, "--region", "xx-newregion-1", "--allow-unknown-region")
    assert done.returncode == 0, done.stderr
