"""What a record's size costs: CPU per MiB to decode and to encode records of 1 KiB, 100 KiB and 5 MiB, and the
memory a read of one record of nearly 10 MiB holds at its peak.

Run: ``.venv/bin/python -m bench.record_size_cost [--total-mib 5] [--repeats 7]``

The bodies are real ones, fetched once from kinesis-mock (the only local server that takes records over 1 MiB):
for each size, one GetRecords answer of about ``--total-mib`` MiB of random data, on a stream raised to 10 MiB
records. Every row takes turns with the others of its table (``bench.common.median_rates``), median of
``--repeats`` runs, in MiB of record data per second of this thread's CPU time (not wall time: the machine may be
shared). Nothing is asserted but that each path yields every record.

1. Decode. Baseline: botocore's JSON parser with GetRecords' output shape. Ours: ``decode_get_records`` plus the
   Arrow batch the source hands Spark. "per byte vs 1 KiB": the row's CPU per MiB over the 1 KiB row's of the
   same path (1.00 or less: a large record costs no more per byte).
2. Encode: the same records as PutRecords bodies, in calls of at most 500 entries. Baseline: botocore's parameter
   validation and JSON serializer (what ``client.put_records`` costs before the network). Ours: the sink's
   ``encode_body``.
3. Memory of reading one record of 10,000 KiB (``--memory-kib``), in a fresh process: its peak resident memory above
   what it held before (Linux's VmHWM, reset through ``/proc/self/clear_refs``), in units of the record's size:
   through the reader client's GetRecords (the HTTP body arrives base64, 1.33 times the record), against
   botocore's own read of the body, and through the decode to the Arrow batch. Arrow's buffers are counted too:
   they are not Python's allocations (``tracemalloc`` would miss them).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import botocore.serialize
import botocore.validate

from bench.common import median_rates
from bench.decode import BotocoreParsers, arrow_run
from localaws import LocalAws, LocalServer
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY, KINESIS_MOCK, project_root
from localaws.streams import create_stream, set_max_record_size, unique_name
from pyspark_aws_kinesis.aws.clients import RAW_BODY, kinesis_reader_client
from pyspark_aws_kinesis.aws.settings import ClientSettings
from pyspark_aws_kinesis.fetch import decode
from pyspark_aws_kinesis.sink.encoded_body import encode_body
from pyspark_aws_kinesis.sink.entries import Entry

KiB, MiB = 1024, 1024 * 1024
SIZES = (("1 KiB", KiB), ("100 KiB", 100 * KiB), ("5 MiB", 5 * MiB))
LARGEST_KIB = 10_240  # what a stream can be raised to (UpdateMaxRecordSize)
# kinesis-mock takes a record of 10,240 KiB but answers GetRecords on it with HTTP 500 (docs/localaws.md)
MEMORY_KIB = 10_000
ENTRIES_PER_CALL = 500  # PutRecords' limit
PUT_BYTES = 8 * MiB  # a PutRecords call of ours stays under the raised stream's 10 MiB a call
SHARD = "shardId-000000000000"
HOWS = ("botocore", "ours")  # who reads the answer's body: botocore's pieces, or the reader client's one read
Records = list[tuple[bytes, str]]


def records_of(size: int, total: int) -> Records:
    """Random records of ``size`` bytes (data and key together, as the record limit counts them), ``total`` bytes
    in all, at least one."""
    count = max(1, total // size)
    return [(os.urandom(size - len(key)), key) for key in (f"k{i:07d}" for i in range(count))]


def put(kinesis: Any, stream: str, records: Records) -> None:
    """Every record, in the calls ``calls`` cuts, each one accepted."""
    for call in calls(records):
        answer = kinesis.put_records(StreamName=stream, Records=[{"Data": d, "PartitionKey": k} for d, k in call])
        assert answer.get("FailedRecordCount", 0) == 0, answer


def fetch_body(server: LocalServer, records: Records) -> bytes:
    """The GetRecords body (undecoded) of a fresh one-shard stream raised to 10 MiB records holding ``records``."""
    setup = server.direct.client("kinesis")
    stream = create_stream(setup, unique_name("bench-size"), 1)
    set_max_record_size(setup, stream, LARGEST_KIB)
    put(setup, stream, records)
    iterator = setup.get_shard_iterator(StreamName=stream, ShardId=SHARD, ShardIteratorType="TRIM_HORIZON")
    reader = kinesis_reader_client(ClientSettings("us-east-1", server.endpoint_url, DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY))
    body = reader.get_records(ShardIterator=iterator["ShardIterator"], Limit=10_000)[RAW_BODY]
    got = len(json.loads(body)["Records"])
    assert got == len(records), f"one answer held {got} of {len(records)} records"
    return body


class BotocoreSerializer:
    """botocore's validation and serializer of a PutRecords call: the encoding baseline."""

    def __init__(self) -> None:
        import boto3

        model = boto3.session.Session().client("kinesis", region_name="us-east-1").meta.service_model
        self.operation = model.operation_model("PutRecords")
        self.validator = botocore.validate.ParamValidator()
        self.serializer = botocore.serialize.create_serializer("json")

    def body(self, params: dict[str, Any]) -> bytes:
        report = self.validator.validate(params, self.operation.input_shape)
        assert not report.has_errors(), report.generate_report()
        return self.serializer.serialize_to_request(params, self.operation)["body"]


def calls(records: Records) -> list[Records]:
    """``records`` cut into PutRecords calls as a sink fills them: at most 500 entries and ``PUT_BYTES``."""
    out: list[Records] = [[]]
    for record in records:
        if len(out[-1]) == ENTRIES_PER_CALL or sum(len(d) for d, _ in out[-1]) + len(record[0]) > PUT_BYTES:
            out.append([])
        out[-1].append(record)
    return out


def decode_runs(body: bytes, count: int, parsers: BotocoreParsers) -> dict[str, Callable[[], object]]:
    assert len(parsers.get_records(body)["Records"]) == count, "botocore's parse lost or invented records"
    ours = arrow_run(decode, decode.decode_get_records, body, count)  # checks its own count
    return {"botocore JSON parser": lambda: parsers.get_records(body), "ours: decode -> Arrow batch": ours}


def encode_runs(records: Records, serializer: BotocoreSerializer) -> dict[str, Callable[[], object]]:
    entries = [[Entry(data, key) for data, key in call] for call in calls(records)]
    params = [{"StreamName": "bench", "Records": [e.to_request() for e in call]} for call in entries]
    return {
        "botocore validate + serialize": lambda: [serializer.body(p) for p in params],
        "ours: encode_body": lambda: [encode_body("bench", call) for call in entries],
    }


def print_size_table(rates: dict[str, dict[str, float]]) -> None:
    """One row per (size, path): MiB/s of CPU, ours over botocore, and CPU per byte against the 1 KiB row."""
    first = next(iter(rates.values()))
    print(f"| {'records':<8} | {'path':<32} | {'MiB/CPU s':>10} | {'vs botocore':>11} | {'per byte vs 1 KiB':>17} |")
    print(f"|{'-' * 10}|{'-' * 34}|{'-' * 12}|{'-' * 13}|{'-' * 19}|")
    for size, by_path in rates.items():
        baseline = next(iter(by_path.values()))
        for path, rate in by_path.items():
            print(
                f"| {size:<8} | {path:<32} | {rate:>10,.1f} | {rate / baseline:>11.2f} | {first[path] / rate:>17.2f} |"
            )
    print()


MEMORY_CHECK = """
import json, os, sys
from pyspark_aws_kinesis.aws.clients import RAW_BODY, kinesis_reader_client
from pyspark_aws_kinesis.aws.settings import ClientSettings
from pyspark_aws_kinesis.fetch import decode
from pyspark_aws_kinesis.shards import MAX_HASH_KEY

def rss(field):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith(field))

def peak_above(step):
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # VmHWM := VmRSS
    before = rss("VmRSS")
    result = step()
    return result, rss("VmHWM") - before

endpoint, access, secret, iterator, size, how = sys.argv[1:7]
reader = kinesis_reader_client(ClientSettings("us-east-1", endpoint, access, secret))
if how == "botocore":  # botocore's own read of the body: 64 KiB pieces, joined
    del reader._endpoint.http_session.send
shard = decode.ShardContext("bench", "shardId-000000000000", 0, MAX_HASH_KEY)
reader.get_records(ShardIterator=iterator, Limit=1)  # once unmeasured: imports, connection, first-call caches
body, fetch = peak_above(lambda: reader.get_records(ShardIterator=iterator, Limit=1)[RAW_BODY])
def to_batch(answer):
    page = decode.decode_get_records(answer, shard)
    return page.to_batch(shard, 0, len(page))
small = {"Records": [{"Data": "aGk=", "PartitionKey": "k", "SequenceNumber": "1", "ApproximateArrivalTimestamp": 1}]}
to_batch(json.dumps({**small, "NextShardIterator": "x", "MillisBehindLatest": 0}))  # imports (pandas, by pyarrow)
batch, decoding = peak_above(lambda: to_batch(body))
assert batch.num_rows == 1 and len(batch.column("data")[0].as_py()) + 8 == int(size)
print(json.dumps({"body": len(body), "fetch": fetch, "decode": decoding}))
"""


def memory_of_one_record(server: LocalServer, size: int, how: str) -> dict[str, int]:
    """Peak memory above the start of a fresh process's GetRecords of one ``size``-byte record, and of its decode;
    ``how``: "ours" (the reader client as the source has it) or "botocore" (botocore's own read of the body)."""
    setup = server.direct.client("kinesis")
    stream = create_stream(setup, unique_name("bench-size"), 1)
    set_max_record_size(setup, stream, LARGEST_KIB)
    put(setup, stream, [(os.urandom(size - 8), "k0000000")])
    iterator = setup.get_shard_iterator(StreamName=stream, ShardId=SHARD, ShardIteratorType="TRIM_HORIZON")
    argv = [server.endpoint_url, DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY, iterator["ShardIterator"], str(size), how]
    # A fixed mmap threshold: glibc would otherwise raise it after the warm-up's large free, and serve the
    # measured read from pages already resident, which the peak would not show.
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(128 * KiB)}
    command = [sys.executable, "-c", MEMORY_CHECK, *argv]
    run = subprocess.run(command, capture_output=True, text=True, cwd=project_root(), env=env, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total-mib", type=float, default=5.0, help="record data a size's body holds")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--memory-kib", type=int, default=MEMORY_KIB, help="the record whose read's memory is shown")
    args = parser.parse_args(argv)
    total = int(args.total_mib * MiB)
    parsers, serializer = BotocoreParsers(), BotocoreSerializer()
    decoding: dict[str, dict[str, float]] = {}
    encoding: dict[str, dict[str, float]] = {}
    with LocalAws([KINESIS_MOCK]) as aws:
        for name, size in SIZES:
            records = records_of(size, total)
            mib = sum(len(data) + len(key) for data, key in records) / MiB
            body = fetch_body(aws.kinesis_mock, records)
            decoding[name] = median_rates(mib, args.repeats, decode_runs(body, len(records), parsers), balanced=True)
            encoding[name] = median_rates(mib, args.repeats, encode_runs(records, serializer), balanced=True)
        memory = {how: memory_of_one_record(aws.kinesis_mock, args.memory_kib * KiB, how) for how in HOWS}

    print(f"MiB of record data per second of this thread's CPU time, median of {args.repeats} runs taking turns;")
    print(f"each size's records total {args.total_mib:g} MiB (one record of 5 MiB)\n")
    print("1. decode: one GetRecords body per size")
    print_size_table(decoding)
    print("2. encode: the same records as PutRecords bodies (500 entries or 8 MiB a call)")
    print_size_table(encoding)
    print_memory(memory, args.memory_kib * KiB)


def print_memory(memory: dict[str, dict[str, int]], record: int) -> None:
    print(
        f"3. one record of {record // KiB:,} KiB read in a fresh process: peak resident memory above the step's start,"
    )
    print(f"   in MiB and in records; the answer's body is {memory['ours']['body'] / MiB:.1f} MiB of base64 JSON")
    print(f"| {'body read by':<24} | {'GetRecords':>16} | {'decode to Arrow':>16} | {'body + batch':>12} |")
    print(f"|{'-' * 26}|{'-' * 18}|{'-' * 18}|{'-' * 14}|")
    for how, label in (("botocore", "botocore (64 KiB pieces)"), ("ours", "ours (one read)")):
        fetch, decoding, body = memory[how]["fetch"], memory[how]["decode"], memory[how]["body"]
        cells = [f"{value / MiB:5.1f} = {value / record:4.2f}x" for value in (fetch, decoding)]
        print(f"| {label:<24} | {cells[0]:>16} | {cells[1]:>16} | {(body + decoding) / record:>11.2f}x |")
    print()


if __name__ == "__main__":
    main()
