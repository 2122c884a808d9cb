"""What several benchmarks share: the local servers (behind AWS's Kinesis quotas unless ``--no-quotas``), source
options for a local server, a preloaded stream, the baseline boto3 reader and a local[2] SparkSession with the
connector registered. Not a benchmark itself (run_all skips it).

Quotas: every benchmark talks to its local server through ``localaws.quota_proxy`` by default, as it would meet
AWS's quotas (5 GetRecords/s and 2 MiB/s read per shard, 1,000 records/s and 1 MiB/s written per shard, ...), and
prints what was refused at the end. Setting up (preloading a stream) goes to the server directly
(``aws.kinesalite.direct``): it is not what is measured. ``--no-quotas`` measures against the bare server.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aws_kinesis_agg.deaggregator import deaggregate_records

from bench import procfs
from localaws import LocalAws, LocalServer, ServerSpec
from localaws.fault_proxy import serving_cpu_s
from localaws.neighbour import NEIGHBOUR_TOKEN
from localaws.quota_proxy import QuotaServer
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY, project_root
from localaws.streams import create_stream, iterate_shard, list_shard_ids, patiently, put_records, unique_name

Server = LocalServer | QuotaServer  # what LocalAws hands out: through the quota proxy, or not


def add_quota_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-quotas",
        action="store_true",
        help="talk to the local server directly (default: through a proxy enforcing AWS's Kinesis quotas)",
    )


def local_aws(args: argparse.Namespace, *specs: ServerSpec) -> LocalAws:
    """The benchmark's servers, each Kinesis server behind AWS's quotas unless ``--no-quotas``."""
    return LocalAws(specs, quotas=not args.no_quotas)


def print_quotas(aws: LocalAws) -> None:
    """What the quota proxies counted and refused, per action and client (after the benchmark's table)."""
    print(aws.quota_summary() or "quotas: not enforced (--no-quotas)")


def options(server: Server, stream: str, metadata: str) -> dict[str, str]:
    return {
        "kinesis.streamname": stream,
        "kinesis.endpointurl": server.endpoint_url,
        "kinesis.awsaccesskeyid": DUMMY_ACCESS_KEY,
        "kinesis.awssecretkey": DUMMY_SECRET_KEY,
        "kinesis.startingposition": "TRIM_HORIZON",
        "kinesis.getrecords.fetchintervalms": "0",
        "kinesis.metadatapath": metadata,
    }


KEYS = 1000  # partition keys of a preloaded stream: key-0 .. key-999


def preloaded_stream(kinesis, prefix: str, shards: int, records: int, size: int, balanced: bool = False) -> str:
    """A new stream holding ``records`` records of ``size`` random bytes (``KEYS`` partition keys; ``balanced``:
    the same number in every shard, ``stream_keys``)."""
    stream = create_stream(kinesis, unique_name(prefix), shards)
    preload(kinesis, stream, records, size, balanced)
    return stream


def preload(kinesis, stream: str, records: int, size: int, balanced: bool = False) -> list[str]:
    """Put ``records`` records of ``size`` random bytes into ``stream``; returns their partition keys, in order
    (``stream_keys``)."""
    payload = os.urandom(size)
    keys = stream_keys(kinesis, stream, records, balanced)
    put_records(kinesis, stream, ((payload, key) for key in keys))
    return keys


def stream_keys(kinesis, stream: str, records: int, balanced: bool = False) -> list[str]:
    """The partition keys of ``preloaded_stream``'s records: ``key-<i % KEYS>``, which Kinesis spreads over the
    shards by their hash (4 shards: the fullest holds 3.6 % more than the mean, and a reader keeping the quotas reads
    its last records alone, at one shard's quota); ``balanced``: record i goes to shard i mod n, each shard's keys
    taken from ``KEYS`` keys of the form key-<j> that hash into it, so every shard holds the same records."""
    if not balanced:
        return [f"key-{i % KEYS}" for i in range(records)]
    ranges = sorted(
        (int(shard["HashKeyRange"]["StartingHashKey"]), int(shard["HashKeyRange"]["EndingHashKey"]))
        for shard in kinesis.list_shards(StreamName=stream)["Shards"]
    )
    per_shard: list[list[str]] = [[] for _ in ranges]
    wanted, index = max(1, KEYS // len(ranges)), 0
    while min(len(keys) for keys in per_shard) < wanted:
        key = f"key-{index}"
        hashed = int.from_bytes(hashlib.md5(key.encode()).digest(), "big")  # Kinesis's hash, not a security use
        shard = next(n for n, (low, high) in enumerate(ranges) if low <= hashed <= high)
        if len(per_shard[shard]) < wanted:
            per_shard[shard].append(key)
        index += 1
    return [per_shard[i % len(ranges)][(i // len(ranges)) % wanted] for i in range(records)]


def boto3_loop(kinesis, stream: str, deaggregate: bool = False) -> int:
    """The baseline: read every shard to its tip by hand; returns the number of user records."""
    count = 0
    for shard_id in list_shard_ids(kinesis, stream):
        records = list(iterate_shard(kinesis, stream, shard_id))
        if deaggregate:
            # aws-kinesis-agg takes Lambda-style dicts and hands aggregated payloads back base64-encoded.
            records = deaggregate_records(lambda_style(records))
        count += len(records)
    return count


def raw_loop(server: Server, stream: str) -> int:
    """The server's own pace: the boto3 loop without botocore's parsing (raw answer bodies, ``json.loads`` only,
    data left base64), one thread. Whatever reads from this server in one thread at a time is at most this fast.
    Behind the quotas it waits out each refusal (``patiently``)."""
    from pyspark_aws_kinesis.aws.clients import RAW_BODY, kinesis_reader_client
    from pyspark_aws_kinesis.aws.settings import ClientSettings

    settings = ClientSettings(
        region="us-east-1",
        endpoint_url=server.endpoint_url,
        access_key_id=DUMMY_ACCESS_KEY,
        secret_key=DUMMY_SECRET_KEY,
    )
    kinesis = kinesis_reader_client(settings)
    count = 0
    for shard_id in list_shard_ids(kinesis, stream):
        iterator = patiently(
            kinesis.get_shard_iterator, StreamName=stream, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            answer = json.loads(patiently(kinesis.get_records, ShardIterator=iterator, Limit=10000)[RAW_BODY])
            count += len(answer["Records"])
            if not answer["Records"] and not answer.get("MillisBehindLatest"):
                break
            iterator = answer.get("NextShardIterator")
    return count


def read_seconds(loop: Callable[..., int], source: Any, stream: str, expected: int) -> float:
    """Wall seconds of ``loop(source, stream)`` (``boto3_loop`` or ``raw_loop``), which must read ``expected``."""
    started = time.perf_counter()
    count = loop(source, stream)
    assert count == expected, (loop.__name__, count, expected)
    return time.perf_counter() - started


def client_cpu_s() -> float:
    """CPU seconds (user + system) spent so far by this benchmark's client side (``client_cpu_by_kind``). The
    difference over a phase is what that phase cost, whichever of those processes did the work."""
    return sum(client_cpu_by_kind().values())


THIS_PROCESS = "this process (pyspark's driver side)"


def client_cpu_by_kind() -> Counter[str]:
    """CPU seconds so far of this process and every live process below it in its session, with the children
    they reaped, by kind (``process_kind``): its Spark JVM, the source runner, Spark's Python workers (pyspark's
    daemon moves itself and its forks to a process group of their own), but not the local servers (each runs in a
    session of its own) nor the proxies in front of them that run in this process (``serving_cpu_s``): they stand
    in for AWS. A daemon's fork that ended is lost (the daemon ignores SIGCHLD, so the kernel reaps it): a reading
    worker lives on after its task, a planning fork does not. Subtract two to see where a phase went."""
    me, stats = os.getpid(), dict(procfs.stat_fields())
    proxies_s = serving_cpu_s()
    session, spent = stats[me][3], Counter[str]()
    for pid in [me, *procfs.below(me, stats)]:
        if stats[pid][3] == session:
            spent[process_kind(pid)] += procfs.cpu_s(stats[pid])
    spent[THIS_PROCESS] -= proxies_s
    return spent


def process_kind(pid: int) -> str:
    """What a process of the benchmark's client side is, from its command line."""
    if pid == os.getpid():
        return THIS_PROCESS
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "other"
    if "java" in command.split(" ", 1)[0]:
        return "the Spark JVM"
    if "python_streaming_source_runner" in command:
        return "the source runner (planning)"
    if "daemon" in command:  # the workers forked by pyspark's daemon or the connector's (reads)
        return "Spark's Python workers"
    return "other"


def delivered_rows(query: Any) -> int:
    """Rows the query's batches took from its source, from its progress (``numRecentProgressUpdates`` kept)."""
    return sum(progress["numInputRows"] for progress in query.recentProgress)


def fetched_per_delivered(server: Server, stream: str, delivered: int) -> str:
    """Records our GetRecords calls on ``stream`` fetched (the quota proxy counts them; every client but the
    neighbour's) per record delivered: above 1, records fetched twice, read quota a neighbour could not use."""
    if not isinstance(server, QuotaServer):
        return "records fetched per record delivered: not counted (no quota proxy: --no-quotas)"
    report = server.quota_proxy.report(groups={"neighbour": NEIGHBOUR_TOKEN})
    fetched = report.tally(stream=stream, client="other", action="GetRecords").records
    ratio = f"{fetched / delivered:.3f}" if delivered else "-"
    return f"records fetched per record delivered: {ratio} ({fetched:,} fetched, {delivered:,} delivered; goal <= 1.02)"


def spark_session(master: str = "local[2]", **conf: str):
    """A session on ``master`` (Python workers on this interpreter, the checkout on their path: executors of a
    local-cluster inherit both from the driver's environment), connector registered. ``conf``: more Spark settings
    (``spark.driver.memory`` works here: pyspark starts the JVM with the builder's settings)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(project_root()), os.environ.get("PYTHONPATH")]))
    from pyspark.sql import SparkSession

    import pyspark_aws_kinesis

    spark = (
        SparkSession.builder.master(master)
        .appName("bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config(map=conf)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    pyspark_aws_kinesis.register(spark)
    return spark


def jvm_pid(spark) -> int:
    """The process id of ``spark``'s driver JVM (for ``/proc`` and ``jcmd``)."""
    return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())


def available_now(spark, source: str, opts: dict[str, str]) -> tuple[float, float, list[dict]]:
    """Epoch start and wall seconds of one AvailableNow query of ``source`` into noop, and its progress."""
    with tempfile.TemporaryDirectory() as checkpoint:
        started_at, started = time.time(), time.perf_counter()
        query = (
            spark.readStream.format(source)
            .options(**opts)
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        wall = time.perf_counter() - started
        assert query.exception() is None, query.exception()
        return started_at, wall, [dict(progress) for progress in query.recentProgress]


def batch_sizes(progress: list[dict]) -> list[tuple[int, int]]:
    """(rows, triggerExecution ms) of each micro-batch of a query's progress."""
    return [(p["numInputRows"], p["durationMs"]["triggerExecution"]) for p in progress]


def steady_state(batches: list[tuple[int, int]]) -> tuple[int, float]:
    """Rows and seconds of the batches after the first (all of them if there is one), from ``batch_sizes``."""
    rest = batches[1:] or batches
    return sum(rows for rows, _ in rest), sum(ms for _, ms in rest) / 1000


def lambda_style(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """botocore's records as the Lambda-style dicts aws-kinesis-agg's deaggregator takes (it hands aggregated
    payloads back base64-encoded)."""
    return [
        {
            "kinesis": {
                "data": base64.b64encode(r["Data"]).decode(),
                "partitionKey": r["PartitionKey"],
                "sequenceNumber": r["SequenceNumber"],
                "kinesisSchemaVersion": "1.0",
                "approximateArrivalTimestamp": r["ApproximateArrivalTimestamp"].timestamp(),
            }
        }
        for r in records
    ]


def median_rates(
    records: int, repeats: int, runs: dict[str, Callable[[], object]], balanced: bool = False
) -> dict[str, float]:
    """Median records per CPU second of each run; the runs take turns, so a change in the machine's load between
    them hits all alike (CPU time is not wall time, but a loaded host still slows caches).

    ``balanced``: what ran just before a run changes its time (on the decode benchmark a decode right after
    botocore's parse of the same 10,000 records took 4 % longer at 1 KiB and 27 % at 100 B than right after another
    decode; a garbage collection before each run instead slowed every decode, the interpreter's free lists emptied).
    So each turn's order is a row of ``balanced_turns``, and the turn's first run runs once unmeasured before it
    (it comes after itself, not after the previous turn's last run): over every ``len(runs)`` turns (``2 *
    len(runs)`` for an odd count) each run comes right after each of the others, and after itself, equally often.
    Without it, every turn is in the order of ``runs``.
    """
    rates: dict[str, list[float]] = {name: [] for name in runs}
    for run in runs.values():
        run()  # warm up: the first run pays for fresh memory pages
    names = list(runs)
    for turn in balanced_turns(names, repeats) if balanced else [names] * repeats:
        if balanced:
            runs[turn[0]]()  # the previous turn's last run would be one more neighbour, the same one each round
        for name in turn:
            started = time.thread_time()
            runs[name]()
            rates[name].append(records / (time.thread_time() - started))
    return {name: statistics.median(values) for name, values in rates.items()}


def balanced_turns(names: list[str], repeats: int) -> list[list[str]]:
    """``repeats`` orders of ``names``, the rows of a Williams design in turn: a Latin square (each name once in
    each place) in which each name comes right after each other name once (twice, with the rows reversed, for an
    odd count) over a full round of its rows. A turn that merely starts one name later each repeat keeps the same
    neighbours: there the name after the baseline was nearly always the same one."""
    count = len(names)
    first = [0] + [(step + 1) // 2 if step % 2 else count - step // 2 for step in range(1, count)]
    orders = [[(index + shift) % count for index in first] for shift in range(count)]
    if count % 2:
        orders += [order[::-1] for order in orders]
    return [[names[index] for index in orders[repeat % len(orders)]] for repeat in range(repeats)]


def print_rate_table(rates: dict[str, float]) -> None:
    """A Markdown table of records/s, each row's ratio to the first row's (the baseline)."""
    baseline = next(iter(rates.values()))
    print(f"| {'path':<40} | {'records/s':>12} | {'ratio':>6} |")
    print(f"|{'-' * 42}|{'-' * 14}|{'-' * 8}|")
    for name, rate in rates.items():
        print(f"| {name:<40} | {rate:>12,.0f} | {rate / baseline:6.2f} |")
    print()
