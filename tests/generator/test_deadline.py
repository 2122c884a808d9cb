"""``--duration`` is a limit on the wall clock, retries included, and a run that did not send everything says so:
``kinesis_generator.run`` and ``python -m kinesis_generator`` against kinesalite behind ``localaws.fault_proxy``, which
throttles whole PutRecords calls and refuses single entries (a refused entry is really not written).

The bounds asserted are the feature's own (docs/generator.md): a run ends by its deadline plus the grace for
calls under way; the checks before the clock starts (building the client, one ListShards) get a little more.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections import Counter

import pytest
from botocore.config import Config

import kinesis_generator
from kinesis_generator.deadline import Timeouts
from localaws.fault_proxy import FaultProxy, Faults
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY, LocalServer, aws_client, project_root
from localaws.streams import read_stream
from pyspark_aws_kinesis.retry import RetryPolicy
from tests.generator.stored_util import assert_stored_as_reported

GRACE_S = 5.0  # documented: how long after the deadline a call under way may take
CHECKS_S = 2.0  # the checks before the schedule starts, on a loaded machine
# Half the calls throttled whole, half of the entries of the others refused: on the code before the deadline
# existed, --rate 500 --duration 3 took 24.7 s here.
HARSH = Faults(throttle_rate=0.5, put_records_entry_failure_rate=0.5, actions=frozenset({"PutRecords"}))
# Enough retries that none is given up on before the deadline (the backoffs of 10 retries add up to > 10 s):
# these runs end with records not sent in time, none lost.
PATIENT = RetryPolicy(max_retries=10, initial_interval_ms=100, max_interval_ms=5000)


@pytest.fixture(autouse=True)
def dummy_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", DUMMY_ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", DUMMY_SECRET_KEY)


def accounted(summary: kinesis_generator.Summary) -> int:
    """Every record due ends in exactly one of these."""
    return summary.records + summary.failed + summary.unsent + summary.unconfirmed


def test_duration_ends_a_throttled_run_on_time_and_counts_what_was_not_sent(kinesalite: LocalServer, lite_stream):
    stream = lite_stream()
    with FaultProxy(kinesalite.endpoint_url, HARSH) as proxy:
        started = time.monotonic()
        summary = kinesis_generator.run(
            stream_name=stream, rate=500, duration_s=3.0, endpoint_url=proxy.endpoint_url, retry=PATIENT, collect=True
        )
        took = time.monotonic() - started
    assert took <= 3.0 + GRACE_S + CHECKS_S, f"ran {took:.1f} s"
    assert summary.elapsed_s <= 3.0 + GRACE_S
    assert summary.due == 1500 and accounted(summary) == 1500
    assert summary.unsent > 0 and summary.failed == 0  # not lost: not sent in time
    assert summary.refused_entries > 0 and summary.retried_calls > 0
    assert summary.rate == pytest.approx(summary.records / summary.elapsed_s) and summary.requested_rate == 500
    stored = Counter((r["PartitionKey"], r["Data"]) for r in read_stream(kinesalite.client("kinesis"), stream))
    assert_stored_as_reported(stored, summary)  # the counts are exact: what is stored, nothing more


def test_records_of_calls_unanswered_at_the_deadline_are_unconfirmed_not_unsent(kinesalite: LocalServer, lite_stream):
    stream = lite_stream()
    faults = Faults(lost_answer_rate=1.0, actions=frozenset({"PutRecords"}))  # every call stored, never answered
    with FaultProxy(kinesalite.endpoint_url, faults) as proxy:
        summary = kinesis_generator.run(
            stream_name=stream, rate=100, duration_s=1.0, endpoint_url=proxy.endpoint_url, retry=PATIENT, collect=True
        )
    assert summary.records == 0 and summary.unconfirmed > 0 and accounted(summary) == summary.due
    stored = Counter((r["PartitionKey"], r["Data"]) for r in read_stream(kinesalite.client("kinesis"), stream))
    assert set(stored) == set(summary.doubtful_records or []) and len(stored) == summary.unconfirmed
    assert "they may or may not be in the stream" in "\n".join(summary.lines())


def test_the_cli_exits_5_with_refusals_live_and_one_clock(kinesalite: LocalServer, lite_stream):
    stream = lite_stream()
    env = {**os.environ, "AWS_ACCESS_KEY_ID": DUMMY_ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": DUMMY_SECRET_KEY}
    env["COLUMNS"] = "200"  # the progress line whole, on a pipe
    with FaultProxy(kinesalite.endpoint_url, HARSH) as proxy:
        done = subprocess.run(
            [sys.executable, "-m", "kinesis_generator", "--stream", stream, "--endpoint-url", proxy.endpoint_url,
             "--rate", "500", "--duration", "2", "--max-retries", str(PATIENT.max_retries)],
            capture_output=True, text=True, env=env, cwd=project_root(), timeout=60,
        )  # fmt: skip
    assert done.returncode == 5, done.stdout + done.stderr
    summary = done.stdout.splitlines()
    assert summary[0].startswith("incomplete: ")
    assert int(re.search(r"not sent in time: (\d+)", done.stdout).group(1)) > 0
    progress = [line for line in done.stderr.splitlines() if line.startswith("sending")][-1]
    assert int(re.search(r"refused ([\d,]+)", progress).group(1).replace(",", "")) > 0
    # The progress clock and the summary's agree.
    assert re.search(r"(\d+\.\d) s$", progress.strip()).group(1) == re.search(r" in (\d+\.\d) s", summary[0]).group(1)


def test_a_call_unanswered_past_the_grace_is_given_up_and_its_records_unconfirmed(kinesalite: LocalServer, lite_stream):
    """A client that waits 60 s for an answer (not the generator's own, whose timeouts fit in the grace)."""
    faults = Faults(latency_s=10.0, actions=frozenset({"PutRecords"}))
    with FaultProxy(kinesalite.endpoint_url, faults) as proxy:
        slow = aws_client("kinesis", proxy.endpoint_url, config=Config(read_timeout=60, retries={"max_attempts": 0}))
        started = time.monotonic()
        summary = kinesis_generator.run(stream_name=lite_stream(), rate=100, duration_s=1.0, client=slow)
        took = time.monotonic() - started
    assert took <= 1.0 + GRACE_S + CHECKS_S, f"ran {took:.1f} s"
    assert summary.unconfirmed >= 1 and summary.records == 0
    assert summary.due == 100 and accounted(summary) == 100


def test_a_stream_that_refuses_everything_is_not_hammered(kinesalite: LocalServer, lite_stream):
    faults = Faults(put_records_entry_failure_rate=1.0, actions=frozenset({"PutRecords"}))
    with FaultProxy(kinesalite.endpoint_url, faults) as proxy:
        started = time.monotonic()
        summary = kinesis_generator.run(
            stream_name=lite_stream(), rate=1000, duration_s=2.0, endpoint_url=proxy.endpoint_url
        )
        took = time.monotonic() - started
    assert took <= 2.0 + GRACE_S + CHECKS_S
    # Backoff between refused rounds (100 ms, doubling): a handful of calls, where a busy loop makes hundreds.
    assert 2 <= proxy.calls["PutRecords"] <= 20
    assert summary.records == 0 and summary.rate == 0 and summary.refused_entries > 0
    assert summary.unsent == summary.due == 2000


def test_count_reached_first_ends_the_run(kinesalite: LocalServer, lite_stream):
    summary = kinesis_generator.run(stream_name=lite_stream(), count=50, rate=1000, duration_s=60, client=None,
                            endpoint_url=kinesalite.endpoint_url)  # fmt: skip
    assert summary.records == summary.due == 50 and summary.complete
    assert summary.elapsed_s < 60


def test_lost_records_exit_4_and_the_summary_says_whether_the_stream_is_too_small(kinesalite: LocalServer, lite_stream):
    """A proxy that refuses every entry; --max-retries 1 gives up on them. 1,500 records/s is more than one
    shard takes (1,000/s); 100 records/s is less than two shards take."""
    env = {**os.environ, "AWS_ACCESS_KEY_ID": DUMMY_ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": DUMMY_SECRET_KEY}
    faults = Faults(put_records_entry_failure_rate=1.0, actions=frozenset({"PutRecords"}))
    one_shard, two_shards = lite_stream(shards=1), lite_stream(shards=2)
    with FaultProxy(kinesalite.endpoint_url, faults) as proxy:
        enough = subprocess.run(
            [sys.executable, "-m", "kinesis_generator", "--stream", two_shards, "--endpoint-url", proxy.endpoint_url,
             "--rate", "100", "--count", "20", "--max-retries", "1", "--quiet"],
            capture_output=True, text=True, env=env, cwd=project_root(), timeout=60,
        )  # fmt: skip
        too_fast = kinesis_generator.run(
            stream_name=one_shard, rate=1500, count=20, endpoint_url=proxy.endpoint_url, retry=RetryPolicy(1, 100, 5000)
        )
    assert enough.returncode == 4, enough.stdout + enough.stderr
    assert "failed (given up after the retries): 20" in enough.stdout
    assert "although it takes the 100 Kinesis records/s" in enough.stdout and "too small" not in enough.stdout
    assert (too_fast.failed, too_fast.records, too_fast.open_shards) == (20, 0, 1)
    assert too_fast.limit_records_per_s == 1000 and too_fast.stream_too_small is True
    assert "the stream is too small for this rate" in too_fast.lines()[-1]


@pytest.mark.parametrize(
    ("call_mib", "connect_s", "read_s"),
    [(0.5, 2.0, 3.0), (1, 2.0, 3.0), (5, 6.0, 7.0), (10, 11.0, 12.0)],
)
def test_the_timeouts_grow_by_a_second_each_per_mib_past_the_first(call_mib: float, connect_s: float, read_s: float):
    timeouts = Timeouts.for_calls_of(int(call_mib * 1024 * 1024))
    assert (timeouts.connect_s, timeouts.read_s) == (connect_s, read_s)
    assert timeouts.grace_s == connect_s + read_s
