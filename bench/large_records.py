"""Large records at a shard's quotas: a shard whose traffic is a share of records of 5 MiB among small ones, written
and read at the per-shard quotas, beside a plain boto3 loop and beside a neighbour, in one run.

Run: ``.venv/bin/python -m bench.large_records [--share 0.02] [--large-mib 5] [--seconds S] [--backlog-mib M]
[--skip-write] [--read-on kinesis-mock,kinesalite]``
(kinesis-mock behind ``localaws.quota_proxy`` with AWS's limits and its model of the write burst,
``localaws.quota_model.Reserve``; one-shard streams raised to 10 MiB records; the reads again on kinesalite taking
records up to 10 MiB, ``localaws.servers.KINESALITE_LARGE``, which answers 5 MiB in about 0.15 s where kinesis-mock
takes 1.4 s). About eight minutes here.

1. **Write**: each writer into a stream of its own for ``--seconds``: ``generator`` (``kinesis_generator.run``
   asked for 1.5 times the shard's 1 MiB/s, ``--large-share`` of its records ``--large-mib`` MiB) and ``boto3 loop``
   (the same mix, PutRecords of up to 10 MiB, the refused entries sent again after 100 ms: what a user writes by
   hand). Per writer: MiB/s over the busy seconds (as ``bench.quotas_write`` counts them), its share of 1 MiB/s, and
   the refused share of the entries offered.
2. **Read**, on each server: a backlog of ``--backlog-mib`` MiB of that mix, put directly into the server, read from
   TRIM_HORIZON by ``query`` (our polling source, the default options, into noop) and by ``boto3 loop`` (GetRecords
   by hand, each refusal waited out): MiB/s at the pace of the admitted calls (every answer's bytes but the last
   over the seconds from the first call to the last), share of the shard's 2 MiB/s; for the query also once
   reading (from its first call after the first probe's: its start, Spark's first task, left out).
3. **Beside a neighbour**, on each server: the query reads a backlog of the same bytes twice, once of records of
   100 KiB (large enough that kinesis-mock, which takes about 400 records a second, writes the backlog in seconds)
   and once of the mix, with a neighbour polling the shard once a second from TRIM_HORIZON as AWS Lambda does
   (``localaws.neighbour``): the neighbour's GetRecords refused beside each. The bar: no more often beside large
   records than beside small ones.

Printed, never asserted (the tests of ``tests/connector/fetch/polling`` and ``tests/connector/sink`` assert the
large-record behaviour on small data).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from bench.common import Server, raw_loop, spark_session
from bench.quotas_busy import start_query
from bench.quotas_write import per_shard
from kinesis_generator import run as generate
from kinesis_generator.large_records import LargeRecords
from localaws import LocalAws
from localaws.neighbour import NEIGHBOUR_TOKEN, Neighbour
from localaws.quota_model import MiB
from localaws.quota_stats import LoggedCall, QuotaReport
from localaws.servers import (
    DUMMY_ACCESS_KEY,
    DUMMY_SECRET_KEY,
    KINESALITE_LARGE,
    KINESALITE_MAX_CALL_BYTES,
    KINESIS_MOCK,
)
from localaws.streams import create_stream, set_max_record_size, unique_name

SMALL_BYTES = 200  # a small record: data + partition key
MID_BYTES = 100 * 1024  # the records of the comparison beside a neighbour
READ_LIMIT = 2 * MiB  # GetRecords bytes per second per shard (AWS)
MAX_CALL = 10 * MiB  # a PutRecords call, once the stream takes records over 1 MiB


def mix(total_bytes: int, large: LargeRecords) -> list[tuple[str, bytes]]:
    """(partition key, data) records of ``total_bytes`` in all: small JSON ones, ``large.share`` of them padded
    to ``large.size`` (the generator's ``LargeRecords``)."""
    records, size, index = [], 0, 0
    while size < total_bytes:
        key = f"key-{index % 1000}"
        data = f'{{"n": {index}}}'.encode().ljust(SMALL_BYTES - len(key), b" ")
        key, data = large.record(index, key, data)
        records.append((key, data))
        size += len(key) + len(data)
        index += 1
    return records


def put_all_by_hand(kinesis, stream: str, records: list[tuple[str, bytes]], max_call: int = MAX_CALL) -> None:
    """The baseline writer: PutRecords of up to 500 entries and ``max_call`` bytes, refused entries sent again after
    100 ms."""
    start = 0
    while start < len(records):
        batch, size = [], 0
        while start < len(records) and len(batch) < 500 and size + len(records[start][1]) <= max_call:
            key, data = records[start]
            batch.append({"Data": data, "PartitionKey": key})
            size, start = size + len(data) + len(key), start + 1
        while batch:
            answer = kinesis.put_records(StreamName=stream, Records=batch)
            batch = [entry for entry, result in zip(batch, answer["Records"], strict=True) if "ErrorCode" in result]
            if batch:
                time.sleep(0.1)


def is_kinesis_mock(server: Server) -> bool:
    """kinesis-mock raises a stream's record limit by UpdateMaxRecordSize and takes 10 MiB calls; kinesalite
    (started large) takes records up to 10 MiB on every stream but calls of at most 7 MiB."""
    return server.name == KINESIS_MOCK.name


def raised_stream(server: Server, prefix: str) -> str:
    """A one-shard stream that takes records up to 10 MiB."""
    direct = server.direct.client("kinesis")
    stream = create_stream(direct, unique_name(prefix), 1)
    if is_kinesis_mock(server):
        set_max_record_size(direct, stream, 10 * 1024)
    return stream


def write_phase(server: Server, args: argparse.Namespace, large: LargeRecords) -> list[str]:
    mean_bytes = large.share * large.size + (1 - large.share) * SMALL_BYTES
    asked = 1.5 * MiB / mean_bytes  # records a second: 1.5 times the shard's bytes
    records = mix(int(1.5 * MiB * args.seconds), large)
    writers = {
        "generator": lambda stream: generate(
            stream, rate=asked, duration_s=args.seconds, endpoint_url=server.endpoint_url, large=large
        ),
        "boto3 loop": lambda stream: put_all_by_hand(server.client("kinesis"), stream, records),
    }
    lines = [f"write: {asked:.1f} records/s asked ({asked * mean_bytes / MiB:.2f} MiB/s), {args.seconds:.0f} s"]
    for writer, write in writers.items():
        stream = raised_stream(server, "bench-lw")
        started = time.monotonic()
        write(stream)
        lines.append(f"  {writer} ({time.monotonic() - started:.1f} s):")
        lines += per_shard(server, stream, aggregated=True)
    return lines


def backlog(server: Server, prefix: str, records: list[tuple[str, bytes]]) -> str:
    stream = raised_stream(server, prefix)
    max_call = MAX_CALL if is_kinesis_mock(server) else KINESALITE_MAX_CALL_BYTES
    put_all_by_hand(server.direct.client("kinesis"), stream, records, max_call)
    return stream


def get_records_calls(report: QuotaReport, stream: str) -> list[LoggedCall]:
    """The GetRecords calls on ``stream`` the proxy logged, refused ones included, in order."""
    return [call for call in report.calls if call.action == "GetRecords" and call.stream == stream]


def read_rate(report: QuotaReport, stream: str, client: str | None = None, skip: int = 0) -> tuple[float, float]:
    """MiB/s of the admitted GetRecords on ``stream`` (of ``client``'s when given; after the first ``skip`` of them)
    at their pace: the bytes of every answer but the last over the seconds from the first call to the last (the last
    answer's bytes are paid back after it), and those seconds."""
    calls = [
        call
        for call in get_records_calls(report, stream)
        if not call.refused and (client is None or client in call.client)
    ][skip:]
    if len(calls) < 2:
        return 0.0, 0.0
    seconds = calls[-1].at_s - calls[0].at_s
    return sum(call.nbytes for call in calls[:-1]) / seconds / MiB, seconds


def start_s(report: QuotaReport, stream: str) -> float:
    """Seconds from the query's first GetRecords on ``stream`` (its first probe) to its second (its first read)."""
    calls = [call.at_s for call in get_records_calls(report, stream)]
    return calls[1] - calls[0] if len(calls) > 1 else 0.0


def query_reads(spark, server: Server, stream: str, count: int, where: str, timeout_s: float) -> float:
    """Run our query from TRIM_HORIZON until it has read ``count`` records; its wall seconds."""
    query = start_query(spark, server.endpoint_url, stream, where, None, {})
    started = time.monotonic()
    try:
        while sum(p["numInputRows"] for p in query.recentProgress) < count:
            if time.monotonic() - started > timeout_s:
                raise TimeoutError(f"the query read {sum(p['numInputRows'] for p in query.recentProgress)} of {count}")
            time.sleep(0.2)
    finally:
        query.stop()
    return time.monotonic() - started


def answer_s(server: Server, size: int) -> float:
    """Seconds from a GetRecords call to its whole answer of one record of ``size`` bytes, through the proxy: a call's
    bytes count against the shard from at most 0.5 s before its answer, so a slower answer delays the next call."""
    stream = raised_stream(server, "bench-la")
    put_all_by_hand(server.direct.client("kinesis"), stream, [("key", os.urandom(size))])
    kinesis = server.client("kinesis")
    shard = kinesis.list_shards(StreamName=stream)["Shards"][0]["ShardId"]
    iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    started = time.monotonic()
    kinesis.get_records(ShardIterator=iterator["ShardIterator"])
    return time.monotonic() - started


def read_phase(spark, server: Server, args: argparse.Namespace, large: LargeRecords, where: str) -> list[str]:
    records = mix(args.backlog_mib * MiB, large)
    timeout_s = 10 * args.backlog_mib  # a tenth of the shard's read rate
    took = answer_s(server, large.size)
    lines = [
        f"read on {server.name}: a backlog of {args.backlog_mib} MiB, {len(records):,} records (one GetRecords of a "
        f"{large.size / MiB:g} MiB record answers in {took:.2f} s here)"
    ]
    for reader in ("query", "boto3 loop"):
        stream = backlog(server, "bench-lr", records)
        started = time.monotonic()
        if reader == "query":
            query_reads(spark, server, stream, len(records), os.path.join(where, stream), timeout_s)
        else:
            raw_loop(server, stream)
        report = server.quota_proxy.report()
        rate, seconds = read_rate(report, stream)
        calls = report.tally(stream=stream, action="GetRecords")
        lines.append(
            f"  {reader} ({time.monotonic() - started:.1f} s): {rate:.2f} MiB/s = {rate * MiB / READ_LIMIT:4.0%} of "
            f"the shard's read limit over {seconds:.1f} s; {calls.calls} GetRecords, {calls.refused} refused"
        )
        if reader == "query":
            reading, seconds = read_rate(report, stream, skip=1)
            lines.append(
                f"    once reading: {reading:.2f} MiB/s = {reading * MiB / READ_LIMIT:4.0%} over {seconds:.1f} s (the "
                f"{start_s(report, stream):.1f} s from its first probe to its first read left out)"
            )
    return lines


def neighbour_phase(spark, server: Server, args: argparse.Namespace, large: LargeRecords, where: str) -> list[str]:
    lines = [f"beside a neighbour polling once a second, on {server.name}: backlogs of {args.backlog_mib} MiB"]
    mid = LargeRecords(1.0, MID_BYTES)  # every record padded to 100 KiB
    for name, kind in (("100 KiB records", mid), ("with large", large)):
        records = mix(args.backlog_mib * MiB, kind)
        stream = backlog(server, "bench-ln", records)
        with Neighbour(server.endpoint_url, stream) as neighbour:
            took = query_reads(spark, server, stream, len(records), os.path.join(where, stream), 10 * args.backlog_mib)
        report = server.quota_proxy.report(groups={"neighbour": NEIGHBOUR_TOKEN})
        ours, _ = read_rate(report, stream)
        share = neighbour.refused / max(neighbour.calls, 1)
        lines.append(
            f"  {name:>15} ({took:.1f} s): neighbour refused {neighbour.refused}/{neighbour.calls} ({share:.1%}); "
            f"the shard read at {ours:.2f} MiB/s by both"
        )
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--share", type=float, default=0.02, help="of the records, large")
    parser.add_argument("--large-mib", type=float, default=5.0)
    parser.add_argument("--seconds", type=float, default=30.0, help="seconds each writer writes")
    parser.add_argument("--backlog-mib", type=int, default=40)
    parser.add_argument("--skip-write", action="store_true", help="no write phase")
    parser.add_argument(
        "--read-on", default="kinesis-mock,kinesalite", help="the servers of the read and neighbour phases, in order"
    )
    args = parser.parse_args(argv)
    large = LargeRecords(args.share, int(args.large_mib * MiB))
    os.environ.setdefault("AWS_ACCESS_KEY_ID", DUMMY_ACCESS_KEY)
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", DUMMY_SECRET_KEY)
    read_on = args.read_on.split(",")
    specs = [KINESIS_MOCK] * (not args.skip_write or KINESIS_MOCK.name in read_on)
    specs += [KINESALITE_LARGE] * (KINESALITE_LARGE.name in read_on)
    with LocalAws(specs, quotas=True) as aws, tempfile.TemporaryDirectory() as where:
        lines = [] if args.skip_write else write_phase(aws.kinesis_mock, args, large)  # kinesalite: the sink's 1 MiB
        print("\n".join(lines), flush=True)
        spark = spark_session()
        for server in (aws[name] for name in read_on):
            for phase in (read_phase, neighbour_phase):
                found = phase(spark, server, args, large, where)
                print("\n".join(found), flush=True)
                lines += found
        spark.stop()
        mixed = f"{args.share:.0%} of the records {args.large_mib:g} MiB"
        writes = "" if args.skip_write else "writes on kinesis-mock, "
        print(f"{writes}reads on {' and '.join(read_on)}, behind the quota proxy (AWS's limits); {mixed}")
        print("\n".join(lines))
        print(aws.quota_summary())


if __name__ == "__main__":
    main()
