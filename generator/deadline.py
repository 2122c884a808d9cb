"""The end of a run on the wall clock: ``--duration`` (or Ctrl-C) ends it, retries and backoff included.

Who uses it: ``kinesis_generator.sender.run`` makes one ``Deadline`` per run and sets it when the schedule starts;
``kinesis_generator.pool`` checks it before each batch's first PutRecords call and hands ``DeadlineRetry`` to
``pyspark_aws_kinesis.sink.put_records.put_all``, whose every wait (backoffs, and waits for a shard's room) goes through
``RetryPolicy.sleep``: there the deadline stops it. So no call starts after the deadline; a call already under
way may finish within the grace (``Timeouts.grace_s``: the client's timeouts, sized by the largest call the run
makes), and the run waits no longer than that for it.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field

from pyspark_aws_kinesis.retry import RetryPolicy
from pyspark_aws_kinesis.sink.entries import MIB

# The generator's client times out within the grace: a new connection in CONNECT_TIMEOUT_S, an answer in
# READ_TIMEOUT_S (PutRecords answers in tens of ms; the KPL gives up on a request after 6 s), for calls up to 1 MiB.
CONNECT_TIMEOUT_S = 2.0
READ_TIMEOUT_S = 3.0
# Each further MiB of a call adds a second to both: the body is sent within the connect timeout (socket.sendall
# counts its whole send), and the service reads it before it answers (docs/generator.md, "When a run ends").
SECONDS_PER_EXTRA_MIB = 1.0


@dataclass(frozen=True)
class Timeouts:
    """How long the generator's client waits on one call: to connect and send it, and for its answer."""

    connect_s: float = CONNECT_TIMEOUT_S
    read_s: float = READ_TIMEOUT_S

    @classmethod
    def for_calls_of(cls, call_bytes: int) -> Timeouts:
        """Timeouts for calls of up to ``call_bytes`` bytes of records."""
        extra = max(0, call_bytes - MIB) / MIB * SECONDS_PER_EXTRA_MIB
        return cls(CONNECT_TIMEOUT_S + extra, READ_TIMEOUT_S + extra)

    @property
    def grace_s(self) -> float:
        """How long after the deadline a call already under way may take to finish."""
        return self.connect_s + self.read_s


SMALL_CALLS = Timeouts()  # calls of up to 1 MiB, every run without --large-size: a grace of 5 s


class DeadlineReached(Exception):
    """A retry would start after the run's deadline: the entries still pending were not sent in time."""


class Deadline:
    """A moment on the monotonic clock after which no PutRecords call starts; None until set (no time limit)."""

    def __init__(self) -> None:
        self.at: float | None = None
        self._stopped = threading.Event()

    def set(self, at: float) -> None:
        """Called once, when the schedule starts: ``at`` = its start + ``--duration``."""
        self.at = at

    def stop(self) -> None:
        """End now (Ctrl-C): waits in retries wake up, no new call starts."""
        now = time.monotonic()
        self.at = now if self.at is None else min(self.at, now)
        self._stopped.set()

    def remaining_s(self) -> float:
        return math.inf if self.at is None else self.at - time.monotonic()

    def passed(self) -> bool:
        return self._stopped.is_set() or self.remaining_s() <= 0

    def wait(self, seconds: float) -> None:
        """Sleep ``seconds``; raise DeadlineReached if the deadline comes first.

        A backoff that would end after the deadline sleeps until the deadline before raising, so a worker does
        not go on to its next batch's first call at once (which would be a busy loop against a refusing stream).
        """
        remaining = self.remaining_s()
        if seconds >= remaining:
            self._stopped.wait(max(0.0, remaining))
            raise DeadlineReached
        if self._stopped.wait(seconds):
            raise DeadlineReached


@dataclass(frozen=True)
class DeadlineRetry(RetryPolicy):
    """A RetryPolicy whose waits end at the deadline: ``put_all`` then gives up on the pending entries by raising
    ``DeadlineReached`` (out of ``put_all``; the entries stored so far were reported through its ``on_stored``)."""

    deadline: Deadline = field(default_factory=Deadline, compare=False)

    @classmethod
    def of(cls, policy: RetryPolicy, deadline: Deadline) -> DeadlineRetry:
        return cls(policy.max_retries, policy.initial_interval_ms, policy.max_interval_ms, deadline)

    def sleep(self, seconds: float) -> None:
        self.deadline.wait(seconds)
