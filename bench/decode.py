"""Decode speed: GetRecords bodies and SubscribeToShard events to rows, ours against botocore's own parser, in one
thread's CPU.

Run: ``.venv/bin/python -m bench.decode [--records N] [--size BYTES] [--repeats N] [--before FILE] [--no-quotas]``
(``--before``: another version of ``connector/fetch/decode.py``, e.g. ``git show main:connector/fetch/decode.py``,
measured in the same run, taking turns with this one: a before/after on a shared machine).

The bodies are real ones, fetched once from kinesalite: one GetRecords answer of ``--records`` plain records of
``--size`` random bytes (default 10,000 x 1 KiB, ~15 MB of JSON), and one of the same user records packed into KPL
aggregates of at most 51,200 bytes (the KPL's default ``AggregationMaxSize``). The SubscribeToShardEvent is the
plain answer's records as an event payload (``Records``, ``ContinuationSequenceNumber``, ``MillisBehindLatest``:
what kinesis-mock and AWS send; kinesis-mock is too slow to fill one with 10,000 records).

Four tables, every row taking turns with the others of its table, median of ``--repeats`` runs, in user records
per second of this thread's CPU time (not wall time: the machine may be shared), the turns in balanced orders
(``bench.common.balanced_turns``: every row comes as often right after the baseline's parse, and right after each
other row, a decode being slower right after botocore's parse); ratio = the row's rate over the table's baseline,
i.e. the baseline's time for the same body over the row's:

1. GetRecords, plain records. Baseline: botocore's JSON parser with GetRecords' output shape (what
   ``client.get_records`` costs beyond the network). Ours: ``pyspark_aws_kinesis.fetch.decode.decode_get_records`` plus
   the Arrow RecordBatch in the source's schema (what ``read()`` yields to Spark), and the decode alone.
2. SubscribeToShardEvent. Baseline: botocore's event-stream parser on the event (what iterating
   ``subscribe_to_shard``'s EventStream costs per event). Ours: ``decode_subscribe_event`` plus the batch.
3. GetRecords, KPL aggregates. Baseline: botocore's parser + aws-kinesis-agg's deaggregator (the user records,
   as the boto3 loop of the other benchmarks reads them); botocore's parser alone, which hands back the aggregates
   (not the user records), is printed below it. Ours: ``decode_get_records`` (which de-aggregates, checking each
   aggregate's MD5) plus the batch. Then the floors: the MD5 of every aggregate alone, the JSON and base64 of the
   body alone (the connector's msgspec decoder), and both in one run: no decoder of this body can cost less, so
   the baseline's time over theirs is the highest ratio any decoder could reach.
4. The parser candidates, each building the same column lists of the plain page (data, keys, sequence numbers,
   arrival floats): ``json.loads`` + ``binascii.a2b_base64`` per record (the decode before msgspec), ``orjson`` +
   ``pybase64`` per record (when both are importable: they are not the connector's dependencies; add them to
   ``PYTHONPATH`` from a ``pip install --target`` folder to compare), and msgspec's decoder into typed structs whose
   ``bytes`` field decodes the base64 (the one ``pyspark_aws_kinesis.fetch.decode`` uses). Baseline: botocore's parser.

Nothing here is asserted but that every path yields the same number of user records.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import sys
from binascii import a2b_base64
from collections.abc import Callable
from types import ModuleType
from typing import Any

import botocore.parsers
from aws_kinesis_agg.deaggregator import deaggregate_records

from bench.common import add_quota_flag, lambda_style, local_aws, median_rates, print_quotas, print_rate_table
from localaws import LocalAws
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY, KINESALITE
from localaws.streams import create_stream, put_records, unique_name
from pyspark_aws_kinesis.aws.clients import RAW_BODY, kinesis_reader_client
from pyspark_aws_kinesis.aws.settings import ClientSettings
from pyspark_aws_kinesis.fetch import decode
from pyspark_aws_kinesis.kpl import DIGEST_SIZE, MAGIC, Aggregator
from pyspark_aws_kinesis.shards import MAX_HASH_KEY

KPL_AGGREGATE_BYTES = 51_200  # the KPL's default AggregationMaxSize
SHARD = "shardId-000000000000"
PUT_CHUNK = 80  # records per PutRecords: 80 aggregates of 51,200 B are 4 MB, under its 5 MiB limit
Run = Callable[[], object]


def fetch_bodies(args: argparse.Namespace) -> tuple[bytes, bytes, LocalAws]:
    """The plain and the aggregated GetRecords answer bodies (through the quotas, unless ``--no-quotas``), and the
    servers they came from (stopped), for their quota counts."""
    users = [(os.urandom(args.size), f"key-{i}") for i in range(args.records)]
    aggregator, aggregates = Aggregator(KPL_AGGREGATE_BYTES), []
    for data, key in users:
        aggregates += [(record.data, record.partition_key) for record in aggregator.add(data, key)]
    last = aggregator.flush()
    aggregates += [(last.data, last.partition_key)] if last else []
    with local_aws(args, KINESALITE) as aws:
        setup = aws.kinesalite.direct.client("kinesis")
        settings = ClientSettings("us-east-1", aws.kinesalite.endpoint_url, DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY)
        bodies = []
        for records in (users, aggregates):
            stream = create_stream(setup, unique_name("bench-decode"), 1)
            for start in range(0, len(records), PUT_CHUNK):  # a PutRecords call takes at most 5 MiB
                put_records(setup, stream, records[start : start + PUT_CHUNK])
            iterator = aws.kinesalite.client("kinesis").get_shard_iterator(
                StreamName=stream, ShardId=SHARD, ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
            answer = kinesis_reader_client(settings).get_records(ShardIterator=iterator, Limit=len(records))
            bodies.append(answer[RAW_BODY])
        return bodies[0], bodies[1], aws


def event_payload(body: bytes) -> bytes:
    """A SubscribeToShardEvent's payload holding the records of a GetRecords answer."""
    records = json.loads(body)["Records"]
    event = {"Records": records, "ContinuationSequenceNumber": records[-1]["SequenceNumber"], "MillisBehindLatest": 0}
    return json.dumps(event).encode()


def load_decode(path: str) -> ModuleType:
    """Another version of ``connector/fetch/decode.py`` (e.g. ``git show main:connector/fetch/decode.py > f``), as a
    module of the same package, so that its relative imports (``..kpl``) find this checkout's modules."""
    spec = importlib.util.spec_from_file_location(f"{decode.__package__}._decode_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def arrow_run(module: Any, decoder: Callable[[bytes, Any], Any], body: bytes, records: int) -> Run:
    """Our path: ``decoder(body, shard)`` (a ``module`` function) plus the Arrow batch; checks the row count once."""
    shard = module.ShardContext("bench", SHARD, 0, MAX_HASH_KEY)

    def run() -> int:
        page = decoder(body, shard)
        return page.to_batch(shard, 0, len(page)).num_rows

    assert run() == records, "the decode lost or invented records"
    return run


class BotocoreParsers:
    """botocore's own parsers, with Kinesis' shapes: the baselines."""

    def __init__(self) -> None:
        import boto3

        model = boto3.session.Session().client("kinesis", region_name="us-east-1").meta.service_model
        self.get_records_shape = model.operation_model("GetRecords").output_shape
        self.event_shape = model.operation_model("SubscribeToShard").output_shape.members["EventStream"]
        self.json = botocore.parsers.create_parser("json")
        self.events = botocore.parsers.EventStreamJSONParser()

    def get_records(self, body: bytes) -> dict[str, Any]:
        return self.json.parse({"body": body, "headers": {}, "status_code": 200}, self.get_records_shape)

    def event(self, payload: bytes) -> dict[str, Any]:
        headers = {
            ":message-type": "event",
            ":event-type": "SubscribeToShardEvent",
            ":content-type": "application/json",
        }
        parsed = self.events.parse({"body": payload, "headers": headers, "status_code": 200}, self.event_shape)
        return parsed["SubscribeToShardEvent"]


def candidates(body: bytes) -> dict[str, Run]:
    """The parsers to choose from, each building the plain page's column lists (table 4 of the module doc)."""

    def stdlib() -> int:
        records = json.loads(body)["Records"]
        columns = [[a2b_base64(r["Data"]) for r in records], [r["PartitionKey"] for r in records]]
        columns += [[r["SequenceNumber"] for r in records], [r["ApproximateArrivalTimestamp"] for r in records]]
        return len(columns[0])

    def msgspec_structs() -> int:
        records = decode._GET_RECORDS.decode(body).Records or []  # the connector's own decoder
        columns = [[r.Data for r in records], [r.PartitionKey for r in records]]
        columns += [[r.SequenceNumber for r in records], [r.ApproximateArrivalTimestamp for r in records]]
        return len(columns[0])

    runs: dict[str, Run] = {"json.loads + binascii (before)": stdlib}
    try:
        import orjson
        import pybase64
    except ImportError:
        print("orjson + pybase64: not importable here, left out (see the module doc)")
    else:

        def orjson_pybase64() -> int:
            records = orjson.loads(body)["Records"]
            columns = [[pybase64.b64decode(r["Data"]) for r in records], [r["PartitionKey"] for r in records]]
            columns += [[r["SequenceNumber"] for r in records], [r["ApproximateArrivalTimestamp"] for r in records]]
            return len(columns[0])

        runs["orjson + pybase64"] = orjson_pybase64
    runs["msgspec typed structs (ours)"] = msgspec_structs
    return runs


def floors(body: bytes) -> dict[str, Run]:
    """What any decoder of this body of KPL aggregates must spend (table 3): the MD5 the format requires of each
    aggregate, the JSON and base64 of the wire (msgspec, the fastest parser of table 4), and the two together."""
    views = [memoryview(record.Data)[len(MAGIC) : -DIGEST_SIZE] for record in decode._GET_RECORDS.decode(body).Records]

    def md5_only() -> int:
        return len([hashlib.md5(view).digest() for view in views])

    def json_base64_only() -> int:
        return len(decode._GET_RECORDS.decode(body).Records)

    return {
        "floor: MD5 of every aggregate alone": md5_only,
        "floor: JSON + base64 of the body alone": json_base64_only,
        "floor: both (no decode can cost less)": lambda: (md5_only(), json_base64_only()),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--before", help="another connector/fetch/decode.py to measure in the same run (a row more)")
    add_quota_flag(parser)
    args = parser.parse_args(argv)
    plain, aggregated, aws = fetch_bodies(args)
    event = event_payload(plain)
    botocore_parsers = BotocoreParsers()
    n, shard = args.records, decode.ShardContext("bench", SHARD, 0, MAX_HASH_KEY)
    before = load_decode(args.before) if args.before else None

    get_records: dict[str, Run] = {
        "botocore JSON parser (baseline)": lambda: botocore_parsers.get_records(plain),
        "decode_get_records -> Arrow RecordBatch": arrow_run(decode, decode.decode_get_records, plain, n),
        "decode_get_records, columns only": lambda: decode.decode_get_records(plain, shard),
    }
    if before:
        get_records["--before's decode -> Arrow RecordBatch"] = arrow_run(before, before.decode_get_records, plain, n)
    events: dict[str, Run] = {
        "botocore event parser (baseline)": lambda: botocore_parsers.event(event),
        "decode_subscribe_event -> Arrow": arrow_run(decode, decode.decode_subscribe_event, event, n),
    }
    if before:
        events["--before's event decode -> Arrow"] = arrow_run(before, before.decode_subscribe_event, event, n)
    kpl: dict[str, Run] = {
        "botocore + aws-kinesis-agg (baseline)": lambda: deaggregate_records(
            lambda_style(botocore_parsers.get_records(aggregated)["Records"])
        ),
        "botocore JSON parser, aggregates only": lambda: botocore_parsers.get_records(aggregated),
        "decode_get_records -> Arrow RecordBatch": arrow_run(decode, decode.decode_get_records, aggregated, n),
    }
    if before:
        kpl["--before's decode -> Arrow RecordBatch"] = arrow_run(before, before.decode_get_records, aggregated, n)
    kpl.update(floors(aggregated))
    parsers = {"botocore JSON parser (baseline)": get_records["botocore JSON parser (baseline)"], **candidates(plain)}

    kinesis_records = len(json.loads(aggregated)["Records"])
    print(f"user records per second of this thread's CPU time, median of {args.repeats} runs taking turns")
    print("ratio = rate / the table's first row (its time for the same body / this row's)\n")
    print(f"1. one GetRecords body: {n:,} records x {args.size} B, {len(plain) / 1e6:.1f} MB")
    print_rate_table(median_rates(n, args.repeats, get_records, balanced=True))
    print(f"2. one SubscribeToShardEvent: the same records, {len(event) / 1e6:.1f} MB")
    print_rate_table(median_rates(n, args.repeats, events, balanced=True))
    print(
        f"3. one GetRecords body of KPL aggregates: the same {n:,} user records in {kinesis_records:,} aggregates "
        f"of <= {KPL_AGGREGATE_BYTES:,} B, {len(aggregated) / 1e6:.1f} MB"
    )
    print_rate_table(median_rates(n, args.repeats, kpl, balanced=True))
    print("4. the parsers to choose from, each to the column lists of body 1")
    print_rate_table(median_rates(n, args.repeats, parsers, balanced=True))
    print_quotas(aws)


if __name__ == "__main__":
    main()
