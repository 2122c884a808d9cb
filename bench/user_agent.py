"""Driver CPU per GetRecords probe: botocore's per-call User-Agent rebuild against ours built once per client.

Run: ``.venv/bin/python -m bench.user_agent [--calls N] [--rounds N]``.

What a driver's idle probe does at 1,000+ shards: GetRecords (Limit 1) on a shard with nothing new, answered
empty by kinesalite. Baseline: the client as botocore builds it (``pyspark_aws_kinesis.aws.clients._new_client``, our
config), which rebuilds the User-Agent header twice per call. Ours: ``kinesis_client`` (what the driver's probes use:
the same client, its User-Agent built once by ``pyspark_aws_kinesis.aws.clients.build_user_agent_once``), and
``kinesis_reader_client`` (what reads use: GetRecords' body left undecoded for ``pyspark_aws_kinesis.fetch.decode``).
Measured: this thread's CPU time per call (the server's CPU and the wait are not counted), median of
``--rounds`` rounds of ``--calls`` calls, the three clients taking turns in each round. Nothing here is asserted.

Unlike the other benchmarks it talks to kinesalite directly, not through AWS's Kinesis quotas (``bench.common``):
it makes thousands of calls a second on one idle shard, which the quota of 5 GetRecords a second per shard would
refuse, and what it measures (this thread's CPU per call) does not depend on them.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from localaws import LocalAws
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY, KINESALITE
from localaws.streams import create_stream, unique_name
from pyspark_aws_kinesis.aws.clients import _new_client, kinesis_client, kinesis_reader_client
from pyspark_aws_kinesis.aws.settings import ClientSettings


def cpu_per_call_us(kinesis: Any, iterator: str, calls: int) -> float:
    started = time.thread_time()
    for _ in range(calls):
        kinesis.get_records(ShardIterator=iterator, Limit=1)
    return (time.thread_time() - started) / calls * 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    with LocalAws([KINESALITE]) as aws:
        kinesis = aws.kinesalite.client("kinesis")
        stream = create_stream(kinesis, unique_name("bench-ua"), 1)
        iterator = kinesis.get_shard_iterator(
            StreamName=stream, ShardId="shardId-000000000000", ShardIteratorType="LATEST"
        )["ShardIterator"]
        settings = ClientSettings("us-east-1", aws.kinesalite.endpoint_url, DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY)
        clients: dict[str, Any] = {
            "botocore, User-Agent per call (baseline)": _new_client("kinesis", settings),
            "kinesis_client (probes), built once": kinesis_client(settings),
            "kinesis_reader_client (reads), built once": kinesis_reader_client(settings),
        }
        runs: dict[str, list[float]] = {name: [] for name in clients}
        for client in clients.values():
            cpu_per_call_us(client, iterator, args.calls)  # warm up: connections, botocore's lazy loads
        for _ in range(args.rounds):
            for name, client in clients.items():
                runs[name].append(cpu_per_call_us(client, iterator, args.calls))
    baseline = statistics.median(next(iter(runs.values())))
    print(f"GetRecords (Limit 1) on an idle kinesalite shard; {args.calls} calls x {args.rounds} rounds, one thread")
    print(f"| {'client':<42} | {'CPU us/call':>11} | {'ratio':>6} |")
    print(f"|{'-' * 44}|{'-' * 13}|{'-' * 8}|  (ratio = baseline CPU / this CPU; > 1 is less CPU)")
    for name, values in runs.items():
        median = statistics.median(values)
        print(f"| {name:<42} | {median:>11,.0f} | {baseline / median:6.2f} |")


if __name__ == "__main__":
    main()
