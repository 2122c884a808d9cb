"""Decode speed: a GetRecords answer body to rows, our path against botocore's own parser, in one thread's CPU.

Run: ``.venv/bin/python -m bench.decode [--records N] [--size BYTES] [--repeats N] [--before FILE] [--no-quotas]``
(``--before``: another version of ``connector/fetch/decode.py``, e.g. ``git show main:connector/fetch/decode.py``,
measured in the same run, taking turns with this one: a before/after on a shared machine).

The body is a real one: kinesalite's answer to one GetRecords (default 10,000 records of 1 KiB, ~13 MB of
JSON), fetched once. Baseline: botocore's JSON parser on that body with GetRecords' output shape (what
``client.get_records`` costs beyond the network). Ours: ``connector.fetch.decode.decode_get_records`` plus the Arrow
RecordBatch in the source's schema (what ``read()`` yields to Spark), and the decode alone. Printed: records
per second of this thread's CPU time (not wall time: the machine may be shared), median of ``--repeats`` runs,
and the ratio to botocore (target >= 3). Nothing here is asserted.

Where the time goes, printed below the table: the two C calls no pure-Python decode avoids (``json.loads`` of
the body, ``binascii.a2b_base64`` of each record's Data), and base64 of all records' Data joined into one
buffer (padding replaced so that it decodes whole; a lower bound of a "one buffer" decode, which would still
have to cut the padding bytes out): on 1 KiB records it is no faster than one call per record, because
binascii's per-byte loop, not the per-call cost, is what takes the time.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from binascii import a2b_base64
from collections.abc import Callable
from types import ModuleType
from typing import Any

import botocore.parsers

from bench.common import add_quota_flag, local_aws, print_quotas
from connector.aws.clients import RAW_BODY, kinesis_reader_client
from connector.aws.settings import ClientSettings
from connector.fetch import decode
from connector.shards import MAX_HASH_KEY
from localaws import LocalAws
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY, KINESALITE
from localaws.streams import create_stream, put_records, unique_name


def fetch_body(args: argparse.Namespace) -> tuple[bytes, LocalAws]:
    """One GetRecords answer body of ``--records`` records (through the quotas, unless ``--no-quotas``), and the
    servers it came from (stopped), for their quota counts."""
    with local_aws(args, KINESALITE) as aws:
        setup = aws.kinesalite.direct.client("kinesis")
        stream = create_stream(setup, unique_name("bench-decode"), 1)
        put_records(setup, stream, ((os.urandom(args.size), f"key-{i}") for i in range(args.records)))
        iterator = aws.kinesalite.client("kinesis").get_shard_iterator(
            StreamName=stream, ShardId="shardId-000000000000", ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        settings = ClientSettings("us-east-1", aws.kinesalite.endpoint_url, DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY)
        answer = kinesis_reader_client(settings).get_records(ShardIterator=iterator, Limit=args.records)
        return answer[RAW_BODY], aws


def median_rates(records: int, repeats: int, runs: dict[str, Callable[[], int]]) -> dict[str, float]:
    """Median records per CPU second of each run; the runs take turns, so a change in the machine's load
    between them hits all alike (CPU time is not wall time, but a loaded host still slows caches)."""
    rates: dict[str, list[float]] = {name: [] for name in runs}
    for run in runs.values():
        run()  # warm up: the first run pays for fresh memory pages
    for _ in range(repeats):
        for name, run in runs.items():
            started = time.thread_time()
            assert run() == records
            rates[name].append(records / (time.thread_time() - started))
    return {name: statistics.median(values) for name, values in rates.items()}


def load_decode(path: str) -> ModuleType:
    """Another version of ``connector/fetch/decode.py`` (e.g. ``git show main:connector/fetch/decode.py > f``), as a
    module of the same package, so that its relative imports (``..kpl``) find this checkout's modules."""
    spec = importlib.util.spec_from_file_location(f"{decode.__package__}._decode_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def arrow_run(module: Any, body: bytes) -> Callable[[], int]:
    """Our path: ``module.decode_get_records`` plus the Arrow batch."""
    shard = module.ShardContext("bench", "shardId-000000000000", 0, MAX_HASH_KEY)

    def run() -> int:
        page = module.decode_get_records(body, shard)
        return page.to_batch(shard, 0, len(page)).num_rows

    return run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--before", help="another connector/fetch/decode.py to measure in the same run (a row more)")
    add_quota_flag(parser)
    args = parser.parse_args(argv)
    body, aws = fetch_body(args)
    import boto3

    shape = boto3.session.Session().client("kinesis", region_name="us-east-1").meta.service_model
    output_shape = shape.operation_model("GetRecords").output_shape
    json_parser = botocore.parsers.create_parser("json")
    shard = decode.ShardContext("bench", "shardId-000000000000", 0, MAX_HASH_KEY)

    def botocore_parse() -> int:
        answer = json_parser.parse({"body": body, "headers": {}, "status_code": 200}, output_shape)
        return len(answer["Records"])

    def ours_decode_only() -> int:
        return len(decode.decode_get_records(body, shard))

    runs = {
        "botocore JSON parser (baseline)": botocore_parse,
        "connector.fetch.decode -> Arrow RecordBatch": arrow_run(decode, body),
        "connector.fetch.decode, columns only": ours_decode_only,
    }
    if args.before:
        runs["--before's decode -> Arrow RecordBatch"] = arrow_run(load_decode(args.before), body)
    rates = median_rates(args.records, args.repeats, runs)
    baseline = rates["botocore JSON parser (baseline)"]
    print(f"one GetRecords body: {args.records:,} records x {args.size} B, {len(body) / 1e6:.1f} MB")
    print(f"records per second of this thread's CPU time, median of {args.repeats} runs taking turns")
    print_table(list(rates.items()), baseline, "(ratio = our rate / botocore's)")
    print("where the time goes (ratio = rate / the decode's, columns only; each part alone)")
    print_table(parts(body, args.records, args.repeats), rates["connector.fetch.decode, columns only"], "")
    print_quotas(aws)


def parts(body: bytes, records: int, repeats: int) -> list[tuple[str, float]]:
    """Rates of the decode's C floor parts alone (see the module doc)."""
    datas = [record["Data"] for record in json.loads(body)["Records"]]
    joined = "".join(datas).replace("=", "A").encode("ascii")

    def loads() -> int:
        return len(json.loads(body)["Records"])

    def per_record() -> int:
        return len([a2b_base64(data) for data in datas])

    def one_buffer() -> int:
        a2b_base64(joined)
        return records

    runs = {
        "json.loads of the body": loads,
        "a2b_base64, one call per record": per_record,
        "a2b_base64, one joined buffer": one_buffer,
    }
    return list(median_rates(records, repeats, runs).items())


def print_table(rows: list[tuple[str, float]], baseline: float, note: str) -> None:
    print(f"| {'path':<40} | {'records/s':>12} | {'ratio':>6} |")
    print(f"|{'-' * 42}|{'-' * 14}|{'-' * 8}|  {note}")
    for name, rate in rows:
        print(f"| {name:<40} | {rate:>12,.0f} | {rate / baseline:6.2f} |")


if __name__ == "__main__":
    main()
