"""Rate accuracy over a long run (default 60 s) into kinesalite: our schedule against a naive sleep loop.

Run: ``.venv/bin/python -m bench.generator_rate [--rate N] [--seconds S] [--no-quotas]``. Target (not asserted):
within 2 %. Both write through AWS's Kinesis quotas by default (``bench.common``; 2 shards take 2,000 records/s).

Both run at the same time, each into its own stream, for the same duration:
- ours: ``kinesis_generator.run(rate=N, duration_s=S)``, which sends what is due against a monotonic clock;
- naive: every 1/10 s send N/10 records, then ``time.sleep(0.1)`` (the time spent sending is lost each tick).
Achieved rate = records stored / seconds; the error is against the asked rate. Both are also checked per
10 s window (the worst window is printed) so a burst-then-idle pattern would show.
"""

from __future__ import annotations

import argparse
import os
import threading
import time

import kinesis_generator
from bench.common import add_quota_flag, local_aws, print_quotas
from kinesis_generator import Template, seed_template
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY, KINESALITE
from localaws.streams import create_stream, unique_name

WINDOW_S = 10.0


def naive(kinesis, stream: str, rate: float, seconds: float, marks: list[tuple[float, int]]) -> float:
    template, started = Template(seed_template()), time.monotonic()
    per_tick = max(1, round(rate / 10))
    sent = 0
    while time.monotonic() - started < seconds:
        batch = [{"Data": template.render_bytes(), "PartitionKey": str(sent + i)} for i in range(per_tick)]
        for start in range(0, len(batch), 500):
            kinesis.put_records(StreamName=stream, Records=batch[start : start + 500])
        sent += per_tick
        marks.append((time.monotonic() - started, per_tick))
        time.sleep(0.1)
    return sent / (time.monotonic() - started)


def worst_window(marks: list[tuple[float, int]], rate: float, seconds: float) -> float:
    """Largest relative error of the records sent in any whole 10 s window, counted from the first batch
    (setup such as building the client comes before a sender's schedule starts)."""
    first = marks[0][0] if marks else 0.0
    marks = [(at - first, n) for at, n in marks]
    errors = []
    for index in range(int(seconds // WINDOW_S)):
        low, high = index * WINDOW_S, (index + 1) * WINDOW_S
        sent = sum(n for at, n in marks if low <= at < high)
        errors.append(abs(sent - rate * WINDOW_S) / (rate * WINDOW_S))
    return max(errors, default=0.0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    add_quota_flag(parser)
    args = parser.parse_args(argv)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", DUMMY_ACCESS_KEY)
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", DUMMY_SECRET_KEY)
    with local_aws(args, KINESALITE) as aws:
        server = aws.kinesalite
        kinesis = server.client("kinesis")
        setup = server.direct.client("kinesis")
        ours_stream = create_stream(setup, unique_name("bench-rate"), 2)
        naive_stream = create_stream(setup, unique_name("bench-naive"), 2)
        naive_marks: list[tuple[float, int]] = []
        naive_rate: list[float] = []
        thread = threading.Thread(
            target=lambda: naive_rate.append(naive(kinesis, naive_stream, args.rate, args.seconds, naive_marks))
        )
        ours_marks: list[tuple[float, int]] = []
        started = time.monotonic()
        thread.start()
        summary = kinesis_generator.run(
            stream_name=ours_stream,
            rate=args.rate,
            duration_s=args.seconds,
            endpoint_url=server.endpoint_url,
            on_sent=lambda users: ours_marks.append((time.monotonic() - started, len(users))),
        )
        thread.join()
    print(f"asked {args.rate:g} records/s for {args.seconds:g} s, both at once into kinesalite")
    print(f"{'sender':<26}{'records':>9}{'records/s':>12}{'error':>9}{'worst 10 s window':>20}")
    for name, records, achieved, marks in (
        ("naive sleep(0.1) loop", sum(n for _, n in naive_marks), naive_rate[0], naive_marks),
        ("kinesis_generator.run", summary.records, summary.rate, ours_marks),
    ):
        error = abs(achieved - args.rate) / args.rate
        window = worst_window(marks, args.rate, args.seconds)
        print(f"{name:<26}{records:>9,}{achieved:>12,.1f}{error:>9.2%}{window:>20.2%}")
    print("target: within 2 %")
    print_quotas(aws)


if __name__ == "__main__":
    main()
