"""``bench.latency.produce``: each PutRecords call lands at a random moment of its tenth of a second, at the asked
rate, so the records (a call's arrive together) keep no fixed phase to the trigger's 200 ms grid: a fixed phase
moved the bench's p50 by up to ±50 ms between runs, while the floor's records are spread evenly."""

from __future__ import annotations

import random
import time

from bench.latency import produce


class _Recorder:
    """A stand-in Kinesis client that notes when each PutRecords came."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, str, int]] = []

    def put_records(self, StreamName: str, Records: list[dict]) -> dict:
        self.calls.append((time.monotonic(), StreamName, len(Records)))
        return {"FailedRecordCount": 0}


def test_each_call_lands_at_a_random_moment_of_its_tenth_of_a_second() -> None:
    kinesis, sent = _Recorder(), []
    started = time.monotonic()
    produce(kinesis, ["a", "b"], 200, 2.0, sent, random.Random(7))
    calls = [at for at, stream, records in kinesis.calls if stream == "a" and records == 20]
    assert 19 <= len(calls) <= 21 and len(sent) == 20 * len(calls)
    assert len(kinesis.calls) == 2 * len(calls)  # the twin stream gets the same records at the same moments
    phases = sorted((at - started) % 0.1 for at in calls)
    assert phases[-1] - phases[0] > 0.06  # spread over the tenth, not one phase for the whole run
