"""Decode speed: a GetRecords answer body to rows, our path against botocore's own parser, on one core.

Run: ``.venv/bin/python -m bench.decode [--records N] [--size BYTES] [--repeats N]``.

The body is a real one: kinesalite's answer to one GetRecords (default 10,000 records of 1 KiB, ~13 MB of
JSON), fetched once. Baseline: botocore's JSON parser on that body with GetRecords' output shape (what
``client.get_records`` costs beyond the network). Ours: ``connector.decode.decode_get_records`` plus the Arrow
RecordBatch in the source's schema (what ``read()`` yields to Spark), and the decode alone. Printed: median
records/s of ``--repeats`` runs and the ratio to botocore (target >= 3). Nothing here is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import botocore.parsers

from connector.aws import RAW_BODY, ClientSettings, kinesis_reader_client
from connector.decode import ShardContext, decode_get_records
from connector.shards import MAX_HASH_KEY
from localaws import LocalAws
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY, KINESALITE
from localaws.streams import create_stream, put_records, unique_name


def fetch_body(records: int, size: int) -> bytes:
    with LocalAws([KINESALITE]) as aws:
        kinesis = aws.kinesalite.client("kinesis")
        stream = create_stream(kinesis, unique_name("bench-decode"), 1)
        put_records(kinesis, stream, ((os.urandom(size), f"key-{i}") for i in range(records)))
        iterator = kinesis.get_shard_iterator(
            StreamName=stream, ShardId="shardId-000000000000", ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        settings = ClientSettings("us-east-1", aws.kinesalite.endpoint_url, DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY)
        return kinesis_reader_client(settings).get_records(ShardIterator=iterator, Limit=records)[RAW_BODY]


def median_rate(records: int, repeats: int, run: Callable[[], int]) -> float:
    run()  # warm up: the first run pays for fresh memory pages
    rates = []
    for _ in range(repeats):
        started = time.perf_counter()
        assert run() == records
        rates.append(records / (time.perf_counter() - started))
    return statistics.median(rates)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    body = fetch_body(args.records, args.size)
    import boto3

    shape = boto3.session.Session().client("kinesis", region_name="us-east-1").meta.service_model
    output_shape = shape.operation_model("GetRecords").output_shape
    json_parser = botocore.parsers.create_parser("json")
    shard = ShardContext("bench", "shardId-000000000000", 0, MAX_HASH_KEY)

    def botocore_parse() -> int:
        answer = json_parser.parse({"body": body, "headers": {}, "status_code": 200}, output_shape)
        return len(answer["Records"])

    def ours_to_arrow() -> int:
        page = decode_get_records(body, shard)
        return page.to_batch(shard, 0, len(page)).num_rows

    def ours_decode_only() -> int:
        return len(decode_get_records(body, shard))

    baseline = median_rate(args.records, args.repeats, botocore_parse)
    rows = [
        ("botocore JSON parser (baseline)", baseline),
        ("connector.decode -> Arrow RecordBatch", median_rate(args.records, args.repeats, ours_to_arrow)),
        ("connector.decode, columns only", median_rate(args.records, args.repeats, ours_decode_only)),
    ]
    print(f"one GetRecords body: {args.records:,} records x {args.size} B, {len(body) / 1e6:.1f} MB; one core; ")
    print(f"median of {args.repeats} runs")
    print(f"| {'path':<40} | {'records/s':>12} | {'ratio':>6} |")
    print(f"|{'-' * 42}|{'-' * 14}|{'-' * 8}|  (ratio = our rate / botocore's)")
    for name, rate in rows:
        print(f"| {name:<40} | {rate:>12,.0f} | {rate / baseline:6.2f} |")


if __name__ == "__main__":
    main()
