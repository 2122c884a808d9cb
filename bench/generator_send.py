"""Sending rate into kinesalite: ``generator.run`` (uncapped rate) against naive boto3 loops, same run.

Run: ``.venv/bin/python -m bench.generator_send [--records N] [--shards N]``.

Baselines render the seed template with ``generator.Template`` too, so only the sending differs:
1. ``put_record`` per record, the loop most people write first;
2. ``put_records`` in batches of 500 with no look at ``FailedRecordCount`` (what the KDG does).
Ours: 1 and 4 sender workers, and KPL aggregation (records/s counts user records). kinesalite never
throttles, so no retries happen here; numbers are measured, never asserted.
"""

from __future__ import annotations

import argparse
import os
import time

import generator
from generator import Template, seed_template
from localaws import LocalAws
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY, KINESALITE
from localaws.streams import create_stream, unique_name

UNCAPPED = 1e9


def put_record_loop(kinesis, stream: str, records: int) -> float:
    template, started = Template(seed_template()), time.perf_counter()
    for i in range(records):
        kinesis.put_record(StreamName=stream, Data=template.render_bytes(), PartitionKey=str(i))
    return records / (time.perf_counter() - started)


def put_records_loop(kinesis, stream: str, records: int) -> float:
    template, started = Template(seed_template()), time.perf_counter()
    for start in range(0, records, 500):
        batch = [{"Data": template.render_bytes(), "PartitionKey": str(start + i)} for i in range(500)]
        kinesis.put_records(StreamName=stream, Records=batch)
    return records / (time.perf_counter() - started)


def ours(endpoint: str, stream: str, records: int, workers: int, aggregate: bool) -> float:
    summary = generator.run(
        stream_name=stream, rate=UNCAPPED, count=records, endpoint_url=endpoint, workers=workers, aggregate=aggregate
    )
    return summary.records / summary.elapsed_s


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--shards", type=int, default=4)
    args = parser.parse_args(argv)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", DUMMY_ACCESS_KEY)
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", DUMMY_SECRET_KEY)
    with LocalAws([KINESALITE]) as aws:
        server = aws.kinesalite
        kinesis = server.client("kinesis")

        def stream() -> str:
            return create_stream(kinesis, unique_name("bench-gen"), args.shards)

        n = args.records
        rows = [
            ("boto3 put_record loop", put_record_loop(kinesis, stream(), max(500, n // 10))),
            ("boto3 put_records 500 loop", put_records_loop(kinesis, stream(), n)),
            ("generator, 1 worker", ours(server.endpoint_url, stream(), n, 1, False)),
            ("generator, 4 workers", ours(server.endpoint_url, stream(), n, 4, False)),
            ("generator, 4 workers, KPL", ours(server.endpoint_url, stream(), n * 5, 4, True)),
        ]
    base = rows[1][1]
    print(f"seed template into kinesalite, {args.shards} shards, {n:,} records (put_record: {max(500, n // 10):,})")
    print(f"{'sender':<30}{'records/s':>12}{'vs put_records loop':>22}")
    for name, value in rows:
        print(f"{name:<30}{value:>12,.0f}{value / base:>22.2f}")


if __name__ == "__main__":
    main()
