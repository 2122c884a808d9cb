"""What framing a SubscribeToShard answer costs, before and after ``fetch.fanout.framing``: the same event streams split
into messages and decoded into Pages by botocore's ``EventStreamBuffer`` fed 64 KiB reads (the path before: urllib3's
``stream(65536)``) and by ``framing.messages`` (a message's rest in one read sized by its prelude), taking turns
in one run. No server, no socket: CPU on one thread.

Run: ``.venv/bin/python -m bench.efo_framing [--repeat 5]``. Two streams:
- one event of 16 MiB of 64 KiB records (256 records; ~21 MiB of JSON: kinesis-mock's answer to a 16 MiB backlog);
- 2,000 small events of 8 records of 1 KiB each (an event per HTTP chunk, as the proxy relays them; reads never
  cross a message's end, as a socket's do not when events come one by one).
Printed: ms per stream (best of ``--repeat``), framing alone and framing + decode, and after / before. Nothing is
asserted (tests/connector/fetch/fanout/test_framing.py counts the reads).
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import time
from collections.abc import Callable, Iterator

from botocore.eventstream import EventStreamBuffer

from localaws.event_stream import encode_event
from pyspark_aws_kinesis.fetch.decode import ShardContext, decode_subscribe_event
from pyspark_aws_kinesis.fetch.fanout.framing import messages

EVENT = {":message-type": "event", ":event-type": "SubscribeToShardEvent", ":content-type": "application/json"}
READ = 65536
CONTEXT = ShardContext("bench", "shardId-000000000000", 0, 2**128 - 1)


def event(records: int, size: int, first: int) -> bytes:
    data = base64.b64encode(os.urandom(size)).decode()
    body = {
        "Records": [
            {"Data": data, "PartitionKey": f"k{i}", "SequenceNumber": str(10**50 + i), "ApproximateArrivalTimestamp": 1}
            for i in range(first, first + records)
        ],
        "ContinuationSequenceNumber": str(10**50 + first + records),
        "MillisBehindLatest": 0,
    }
    return encode_event(EVENT, json.dumps(body).encode())


class Answer:
    """A raw answer's ``read(n)``: at most ``n`` bytes, never past the end of the message being read."""

    def __init__(self, events: list[bytes]):
        self.stream = io.BytesIO(b"".join(events))
        self.ends = [0]
        for item in events:
            self.ends.append(self.ends[-1] + len(item))
        self.next_end = 1

    def read(self, size: int) -> bytes:
        here = self.stream.tell()
        while self.next_end < len(self.ends) and self.ends[self.next_end] <= here:
            self.next_end += 1
        limit = self.ends[self.next_end] - here if self.next_end < len(self.ends) else size
        return self.stream.read(min(size, limit))


def before(answer: Answer) -> Iterator[bytes]:
    buffer = EventStreamBuffer()
    for chunk in iter(lambda: answer.read(READ), b""):
        buffer.add_data(chunk)
        for message in buffer:
            yield message.payload


def after(answer: Answer) -> Iterator[bytes]:
    for message in messages(answer.read):
        yield message.payload


def best_ms(run: Callable[[], int], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times) * 1000


def measure(events: list[bytes], repeat: int) -> dict[str, float]:
    results: dict[str, list[float]] = {}
    for _ in range(repeat):  # taking turns: a neighbour's load falls on both alike
        for name, frame in (("before", before), ("after", after)):
            framing = best_ms(lambda frame=frame: sum(1 for _ in frame(Answer(events))), 1)
            decoding = best_ms(
                lambda frame=frame: sum(len(decode_subscribe_event(p, CONTEXT)) for p in frame(Answer(events))), 1
            )
            results.setdefault(f"{name} framing", []).append(framing)
            results.setdefault(f"{name} framing+decode", []).append(decoding)
    return {name: min(values) for name, values in results.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    streams = {
        "1 event of 256 x 64 KiB records": [event(256, 64 * 1024, 0)],
        "2,000 events of 8 x 1 KiB records": [event(8, 1024, 8 * i) for i in range(2000)],
    }
    print(f"{'stream':<36}{'MiB':>6}{'':>3}{'before ms':>11}{'after ms':>10}{'after/before':>14}")
    for label, events in streams.items():
        mib = sum(map(len, events)) / (1 << 20)
        found = measure(events, args.repeat)
        for what in ("framing", "framing+decode"):
            old, new = found[f"before {what}"], found[f"after {what}"]
            print(f"{label:<36}{mib:>6.1f}   {old:>11.1f}{new:>10.1f}{new / old:>14.2f}  {what}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
