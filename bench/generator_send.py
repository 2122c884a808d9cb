"""Sending rate into kinesalite: ``kinesis_generator.run`` (uncapped rate) against naive boto3 loops, same run.

Run: ``.venv/bin/python -m bench.generator_send [--records N] [--shards N] [--no-quotas]``.

Baselines render the seed template with ``kinesis_generator.Template`` too, so only the sending differs:
1. ``put_record`` per record, the loop most people write first;
2. ``put_records`` in batches of 500 with no look at ``FailedRecordCount`` (what the KDG does).
Ours: 1 and 4 sender workers, and KPL aggregation (records/s counts user records). By default kinesalite sits
behind AWS's Kinesis quotas (``bench.common``: 1,000 records/s and 1 MiB/s per shard): what a sender is refused is
printed per sender (the batch loop does not retry, so its refused entries are lost); with ``--no-quotas``
kinesalite never throttles and no retries happen. Numbers are measured, never asserted.
"""

from __future__ import annotations

import argparse
import os
import time

import kinesis_generator
from bench.common import add_quota_flag, local_aws, print_quotas
from kinesis_generator import Template, seed_template
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
    summary = kinesis_generator.run(
        stream_name=stream, rate=UNCAPPED, count=records, endpoint_url=endpoint, workers=workers, aggregate=aggregate
    )
    return summary.records / summary.elapsed_s


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--shards", type=int, default=4)
    add_quota_flag(parser)
    args = parser.parse_args(argv)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", DUMMY_ACCESS_KEY)
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", DUMMY_SECRET_KEY)
    with local_aws(args, KINESALITE) as aws:
        server = aws.kinesalite
        kinesis = server.client("kinesis")
        streams = [
            create_stream(server.direct.client("kinesis"), unique_name("bench-gen"), args.shards) for _ in range(5)
        ]
        n = args.records
        rows = [
            ("boto3 put_record loop", put_record_loop(kinesis, streams[0], max(500, n // 10))),
            ("boto3 put_records 500 loop", put_records_loop(kinesis, streams[1], n)),
            ("generator, 1 worker", ours(server.endpoint_url, streams[2], n, 1, False)),
            ("generator, 4 workers", ours(server.endpoint_url, streams[3], n, 4, False)),
            ("generator, 4 workers, KPL", ours(server.endpoint_url, streams[4], n * 5, 4, True)),
        ]
    proxy = aws.kinesalite.quota_proxy
    refused = [proxy.report().tally(stream=s).refused_records if proxy else 0 for s in streams]
    base = rows[1][1]
    print(f"seed template into kinesalite, {args.shards} shards, {n:,} records (put_record: {max(500, n // 10):,})")
    print(f"{'sender':<30}{'records/s':>12}{'vs put_records loop':>22}{'entries refused':>17}")
    for (name, value), entries in zip(rows, refused, strict=True):
        print(f"{name:<30}{value:>12,.0f}{value / base:>22.2f}{entries:>17,}")
    print_quotas(aws)


if __name__ == "__main__":
    main()
