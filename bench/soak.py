"""Soak: a kinesis -> kinesis (or -> files) query at a steady rate for a long time, with what happens in
production: the driver SIGKILLed and restarted on its checkpoint, a split and a merge of the source stream.
Memory, threads, descriptors and storage must stay bounded, and nothing may be lost.

Run: ``.venv/bin/python -m bench.soak [--minutes 60] [--rate 1000] [--shards 2] [--restart-every 15]
[--kill-at schedule|written] [--shards-per-partition N] [--efo] [--store path|dynamodb] [--sink kinesis|file]
[--skip-replayed] [--no-reshard] [--no-quotas] [--out DIR]``
(also ``bench.run_all soak``). The generator and the query meet AWS's Kinesis quotas by default (``bench.common``).

The generator's sender (``kinesis_generator.run``) puts ``--rate`` records/s, each with a unique id, into the source
stream (kinesalite; kinesis-mock with ``--efo``, which kinesalite cannot serve); the query (``bench.soak_driver``,
a process of its own with ``spark.driver.memory`` fixed) reads it with our source, over GetRecords or enhanced
fan-out, keeps its metadata in a directory or a DynamoDB table (moto), and writes with our sink into a second
stream (``--skip-replayed``: with ``kinesis.sink.skipReplayedPartitions``, notes in the work directory) or with
Spark's file sink into a directory. Every ``--restart-every`` minutes the driver's whole process
group is SIGKILLed and a new driver starts on the checkpoint (``--kill-at written``: not on the minute but at the
first task to finish after it, which leaves its batch written in part or whole and not committed); at a third of
the run a source shard is split, at two thirds two adjacent shards are merged.

Every ``--sample-s`` seconds (``bench.soak_gauges``): the driver JVM's heap used after a full GC, metaspace and
code cache (``jcmd``), its threads, RSS, descriptors and sockets; the same for pyspark's streaming source runner
(the driver-side Python process of our source), the Python workers (mean and largest RSS per worker: Spark reaps
and starts them, so their sum is not a leak gauge), the subscription broker (``--efo``) and the driver's own Python
process; the metadata store's entries and MiB and the checkpoint's files and MiB; the lag. This harness's own
RSS (it keeps every sent id) is plotted as "harness" and never judged.

Judged after warm-up (the later of 20 % of the run, at least 60 s, and the query first caught up), leaving out
``REWARM_S`` after each restart: no judged gauge rises more than 10 % above its baseline (the median of its first
three judged samples) or its stated constant slack, whichever is wider (``GAUGES``), nor does its trend; a fall is
not growth (``bench.soak_verdict``). At the end the
query drains and stops; the source and the sink are read back. Every record the source stream holds is in the
sink as often as in the source exactly into files, at least as often into Kinesis (the sink is at-least-once: a
batch replayed after a kill may write again), nothing that was not in the source; and every put the sender saw
acknowledged is in the source. (A put the sender retried after a timeout may be stored twice: the source stream,
not the sender's count, is what the query owes.)

Writes ``soak.txt``, ``soak.csv`` and ``soak.png`` (a panel per gauge, bounds drawn, restarts marked; needs
matplotlib) into ``--out`` (default ``bench/results``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import kinesis_generator
from bench import common
from bench import soak_gauges as gauges
from bench.soak_plot import plot
from bench.soak_verdict import (
    GAUGES,
    REWARM_S,
    Sample,
    Tally,
    gauge_lines,
    read_csv,
    verdict_on_gauges,
    write_csv,
)
from kinesis_generator.deadline import CONNECT_TIMEOUT_S
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY, KINESALITE, KINESIS_MOCK, MOTO, aws_client
from localaws.streams import create_stream, iterate_shard, list_shard_ids, unique_name, wait_for_stream_active
from pyspark_aws_kinesis.aws.clients import kinesis_client
from pyspark_aws_kinesis.aws.settings import ClientSettings
from pyspark_aws_kinesis.fetch.fanout.protocol import ENV_DIR
from pyspark_aws_kinesis.kpl import deaggregate, is_aggregated
from pyspark_aws_kinesis.shards import list_shards, open_shards

RESULTS = Path(__file__).resolve().parent / "results"
RATE = 1000.0  # records/s into kinesalite
# kinesis-mock's PutRecords slows as its stream fills (100 records took 97 ms at 5,000 records in the stream,
# 565 ms at 30,000: docs/localaws.md), so a steady rate it keeps up with for an hour is a low one; at 200/s it
# stopped answering within 30 s after ~5 minutes.
EFO_RATE = 25.0
SENDER_READ_TIMEOUT_S = 30.0
DRIVER_START_S = 240.0
KILL_WAIT_S = 120.0  # --kill-at written: how long a kill waits for a finished task before it is sent anyway
TEMPLATE = '{"id": "{{random.uuid}}", "country": "{{random.arrayElement(["Spain","Portugal","Finland"])}}"}'


class Driver:
    """The query's driver process (``bench.soak_driver``): started, SIGKILLed with its process group, restarted."""

    def __init__(self, config: dict[str, Any], work: Path):
        self.config, self.work = config, work
        self.incarnation = 0
        self.process: subprocess.Popen | None = None
        self.restarts: list[float] = []  # harness seconds of each kill

    def start(self) -> None:
        self.incarnation += 1
        path = self.work / f"driver-{self.incarnation}.config.json"
        path.write_text(json.dumps({**self.config, "incarnation": self.incarnation}))
        log = (self.work / f"driver-{self.incarnation}.log").open("w")
        command = [sys.executable, "-m", "bench.soak_driver", str(path)]
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def status(self) -> dict[str, Any] | None:
        path = self.work / f"driver-{self.incarnation}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def wait_started(self) -> dict[str, Any]:
        deadline = time.monotonic() + DRIVER_START_S
        while time.monotonic() < deadline:
            status = self.status()
            if status is not None:
                return status
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"the driver exited with {self.process.returncode}: see {self.work}/driver-*.log")
            time.sleep(0.5)
        raise RuntimeError(f"the driver did not start within {DRIVER_START_S} s")

    def kill(self, at_s: float) -> None:
        """SIGKILL the driver's process group (its Python, the JVM, the Python workers); the broker, in a session
        of its own, lives on as it does on an executor host."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.restarts.append(at_s)

    def kill_when_written(self, at_s: float) -> str:
        """Have the driver SIGKILL itself once a task of a batch has finished (``bench.soak_driver``), or kill it
        after ``KILL_WAIT_S``; say what the kill met: the task and whether a batch was left uncommitted."""
        assert self.process is not None
        arm = self.work / "kill-when-written"
        arm.touch()
        try:
            self.process.wait(timeout=KILL_WAIT_S)
            self.restarts.append(at_s)
        except subprocess.TimeoutExpired:
            self.kill(at_s)
        arm.unlink()
        met = self.work / f"kill-{self.incarnation}.json"
        task = json.loads(met.read_text()) if met.exists() else None
        when = (
            f"after {task['finished_tasks']} of stage {task['stage']}'s {task['tasks']} tasks finished"
            if task
            else f"no task finished within {KILL_WAIT_S:.0f} s"
        )
        pending = uncommitted_batch(self.work / "checkpoint")
        return f"{when}; " + (f"batch {pending} uncommitted" if pending is not None else "no batch uncommitted")

    def stop(self) -> None:
        (self.work / "stop").touch()
        if self.process is not None:
            try:
                self.process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)

    def abandon(self) -> None:
        """SIGKILL a driver still running (the harness is failing or interrupted): it is in a session of its own."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def errors(self) -> list[str]:
        return [path.read_text() for path in sorted(self.work.glob("driver-*.error"))]


def uncommitted_batch(checkpoint: Path) -> int | None:
    """The batch a restart on ``checkpoint`` runs again: one in Spark's offset log and not in its commit log."""

    def last(log: str) -> int:
        return max((int(p.name) for p in (checkpoint / log).glob("*") if p.name.isdigit()), default=-1)

    planned = last("offsets")
    return planned if planned > last("commits") else None


class Sampler(threading.Thread):
    """Every ``every_s``: the gauges (``Sample``), printed as JSON lines. A heap after GC more than its slack above
    the lowest of the same driver's is an outlier: its class histogram goes to ``outliers`` (what it is made of)."""

    def __init__(self, driver: Driver, sent: list[int], store: Any, every_s: float) -> None:
        super().__init__(daemon=True)
        self.driver, self.sent, self.store, self.every_s = driver, sent, store, every_s
        self.samples: list[Sample] = []
        self.outliers: list[str] = []
        self.lowest_heap: dict[int, float] = {}  # incarnation -> its lowest heap after GC so far
        self.started = time.monotonic()
        self.done = threading.Event()

    def elapsed(self) -> float:
        return round(time.monotonic() - self.started, 1)

    def read_so_far(self) -> int:
        """Rows the query read, each batch counted once (a batch replayed after a kill has the same id)."""
        rows: dict[int, int] = {}
        path = self.driver.work / "progress.jsonl"
        if path.exists():
            for line in path.read_text().splitlines():
                if line.strip():
                    event = json.loads(line)
                    rows[event["batchId"]] = event["rows"]
        return sum(rows.values())

    def sample(self) -> Sample:
        status = self.driver.status() or {}
        jvm_pid, python_pid = status.get("jvm_pid"), status.get("python_pid")
        runners, workers = gauges.python_roles(jvm_pid) if jvm_pid else ([], [])
        java, heap = gauges.process(jvm_pid), gauges.jvm(jvm_pid)
        if jvm_pid and heap.heap_after_gc_mb:
            self.note_outlier(jvm_pid, heap.heap_after_gc_mb)
        runner, pool = gauges.total(runners), gauges.total(workers)
        broker = gauges.total(gauges.brokers(self.driver.work))
        entries, store_mb = self.store()
        checkpoint_files, checkpoint_mb = gauges.tree(Path(self.driver.config["checkpoint"]))
        read = self.read_so_far()
        return Sample(
            self.elapsed(),
            self.driver.incarnation,
            self.sent[0],
            read,
            self.sent[0] - read,
            round(heap.heap_after_gc_mb, 1),
            round(heap.metaspace_mb, 1),
            round(heap.code_cache_mb, 1),
            round(java.rss_mb, 1),
            java.threads,
            java.fds,
            java.sockets,
            round(runner.rss_mb, 1),
            runner.threads,
            runner.fds,
            runner.sockets,
            pool.count,
            round(pool.rss_mb / pool.count, 1) if pool.count else 0.0,
            round(max((gauges.process(pid).rss_mb for pid in workers), default=0.0), 1),
            pool.fds,
            pool.sockets,
            broker.count,
            round(broker.rss_mb, 1),
            broker.fds,
            broker.sockets,
            round(gauges.process(python_pid).rss_mb, 1),
            entries,
            round(store_mb, 2),
            checkpoint_files,
            round(checkpoint_mb, 2),
            round(gauges.process(os.getpid()).rss_mb, 1),
            round(heap.young_after_gc_mb, 1),
        )

    def note_outlier(self, jvm_pid: int, heap_mb: float) -> None:
        lowest = self.lowest_heap.setdefault(self.driver.incarnation, heap_mb)
        self.lowest_heap[self.driver.incarnation] = min(lowest, heap_mb)
        if heap_mb > lowest + GAUGES["jvm_heap_after_gc_mb"]:
            self.outliers.append(
                f"{self.elapsed():.0f} s, driver {self.driver.incarnation}: heap after GC {heap_mb:.1f} MiB (this "
                f"driver's lowest {lowest:.1f}); GC.class_histogram:\n{gauges.class_histogram(jvm_pid)}\n"
            )

    def run(self) -> None:
        while not self.done.wait(self.every_s):
            self.samples.append(self.sample())
            print(json.dumps(asdict(self.samples[-1])), flush=True)


# --- the run ----------------------------------------------------------------------------------------------------


def record_id(data: bytes) -> str:
    return json.loads(data)["id"]


class StreamIds:
    """Every user record id in a stream, de-aggregating KPL records (the sink aggregates by default). Each call
    reads on from where the last one stopped: the drain asks every ten seconds, and reading 7 million records again
    each time outlasted the drain's deadline."""

    def __init__(self, kinesis: Any, stream: str) -> None:
        self.kinesis, self.stream = kinesis, stream
        self.ids: Counter[str] = Counter()
        self.last_read: dict[str, str] = {}  # shard id -> the sequence number of the last record read

    def __call__(self) -> Counter[str]:
        for shard_id in list_shard_ids(self.kinesis, self.stream):
            after = self.last_read.get(shard_id)
            for record in iterate_shard(self.kinesis, self.stream, shard_id, after=after):
                data = record["Data"]
                users = [user.data for user in deaggregate(data)] if is_aggregated(data) else [data]
                self.ids.update(record_id(user) for user in users)
                self.last_read[shard_id] = record["SequenceNumber"]
        return self.ids


class FileSinkIds:
    """Every id in the files Spark's file sink committed (its ``_spark_metadata`` log; files of a batch a kill
    interrupted are not in it, and readers of the sink never see them). Each call reads only files it has not read."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.ids: Counter[str] = Counter()
        self.files_read: set[str] = set()

    def __call__(self) -> Counter[str]:
        for path in sorted(self.committed() - self.files_read):
            self.ids.update(record_id(line.encode()) for line in Path(path).read_text().splitlines() if line.strip())
            self.files_read.add(path)
        return self.ids

    def committed(self) -> set[str]:
        paths: set[str] = set()
        for entry in sorted((self.directory / "_spark_metadata").glob("[0-9]*")):
            for line in entry.read_text().splitlines()[1:]:  # the first line is the log's version
                if line.strip():
                    paths.add(json.loads(line)["path"].removeprefix("file://"))
        return paths


def drained(read: int, owed: Counter[str], delivered: Callable[[], Counter[str]] | None) -> bool:
    """The query has taken every record the source stream holds (``owed``): by its progress events' row count
    (``read``), or, when ``delivered`` is given (it reads the sink: slower, so not every second), because the sink
    holds every owed id. The count alone can stay short for good: the driver writes the progress events it polls
    once a second, and a batch that finished in the second before a SIGKILL never runs again (it is committed)."""
    if read >= sum(owed.values()):
        return True
    return delivered is not None and not owed.keys() - delivered().keys()


def reshard(kinesis: Any, stream: str, merge: bool) -> str:
    """Split the first open shard in two, or merge the first two adjacent open shards; says what it did."""
    shards = sorted(open_shards(list_shards(kinesis, stream)), key=lambda shard: shard.starting_hash_key)
    if merge:
        adjacent = itertools.pairwise(shards)
        low, high = next((a, b) for a, b in adjacent if b.starting_hash_key == a.ending_hash_key + 1)
        kinesis.merge_shards(StreamName=stream, ShardToMerge=low.shard_id, AdjacentShardToMerge=high.shard_id)
        done = f"merged {low.shard_id} and {high.shard_id}"
    else:
        parent = shards[0]
        middle = (parent.starting_hash_key + parent.ending_hash_key) // 2
        kinesis.split_shard(StreamName=stream, ShardToSplit=parent.shard_id, NewStartingHashKey=str(middle))
        done = f"split {parent.shard_id}"
    time.sleep(0.5)
    wait_for_stream_active(kinesis, stream, timeout_s=60)
    return done


def store_gauge(args: argparse.Namespace, aws: Any, work: Path, table: str) -> Any:
    """A function giving the metadata store's (entries, MiB)."""
    if args.store == "dynamodb":
        dynamodb = aws_client("dynamodb", aws.moto.endpoint_url)
        return lambda: gauges.table(dynamodb, table)
    return lambda: gauges.tree(work / "metadata")


def driver_config(args: argparse.Namespace, server: Any, aws: Any, work: Path, streams: tuple[str, str], table: str):
    source = common.options(server, streams[0], str(work / "metadata"))
    if args.shards_per_partition:
        source["kinesis.shardsPerPartition"] = str(args.shards_per_partition)
    if args.efo:
        source.update({"kinesis.consumertype": "SubscribeToShard", "kinesis.consumername": unique_name("soak")})
    if args.store == "dynamodb":
        del source["kinesis.metadatapath"]
        source.update(
            {
                "kinesis.metadatacommittertype": "DYNAMODB",
                "kinesis.dynamodb.tablename": table,
                "kinesis.dynamodb.endpointurl": aws.moto.endpoint_url,
            }
        )
    sink = {
        "kinesis.streamName": streams[1],
        "kinesis.endpointUrl": server.endpoint_url,
        "kinesis.awsAccessKeyId": DUMMY_ACCESS_KEY,
        "kinesis.awsSecretKey": DUMMY_SECRET_KEY,
    }
    if args.skip_replayed:
        sink.update({"kinesis.sink.skipReplayedPartitions": "true", "kinesis.metadataPath": str(work / "sink-notes")})
    (work / "broker").mkdir(mode=0o700)
    return {
        "work": str(work),
        "source": source,
        "sink": args.sink,
        "sink_options": sink,
        "file_sink": str(work / "out"),
        "checkpoint": str(work / "checkpoint"),
        "kill_when_written": args.kill_at == "written",
        "spark": {"spark.driver.memory": args.driver_memory},
        "env": {ENV_DIR: str(work / "broker"), "AWS_ACCESS_KEY_ID": DUMMY_ACCESS_KEY},
    }


def sender_client(endpoint_url: str) -> Any:
    """The generator's client with a patient read timeout: kinesis-mock, as its stream fills, sometimes answers a
    PutRecords after more than the generator's 3 s (a put it then stores is still owed; see ``Tally``)."""
    settings = ClientSettings(
        region="us-east-1",
        endpoint_url=endpoint_url,
        max_pool_connections=4,
        connect_timeout_s=CONNECT_TIMEOUT_S,
        read_timeout_s=SENDER_READ_TIMEOUT_S,
    )
    return kinesis_client(settings)


def send_in_background(source: str, server: Any, args: argparse.Namespace, sent_ids: Counter[str], sent: list[int]):
    lock = threading.Lock()
    result: dict[str, Any] = {}

    def on_sent(batch: list[tuple[str, bytes]]) -> None:  # the sender's worker threads
        with lock:
            sent_ids.update(record_id(data) for _, data in batch)
            sent[0] += len(batch)

    def send() -> None:
        try:
            result["summary"] = kinesis_generator.run(
                source,
                TEMPLATE,
                rate=args.rate,
                duration_s=args.minutes * 60,
                client=sender_client(server.endpoint_url),
                workers=2,
                on_sent=on_sent,
            )
        except Exception as error:  # reported with the run's outcome; the query still drains what was stored
            result["error"] = f"{type(error).__name__}: {error}"

    thread = threading.Thread(target=send, name="soak-sender", daemon=True)
    thread.start()
    return thread, result


def events_due(args: argparse.Namespace) -> list[tuple[float, str]]:
    """(harness second, "restart" / "split" / "merge") in order."""
    run_s = args.minutes * 60
    due = []
    if args.restart_every > 0:
        every = args.restart_every * 60
        due += [(every * n, "restart") for n in range(1, int(run_s // every) + 1) if every * n < run_s]
    if not args.no_reshard:
        due += [(run_s / 3, "split"), (2 * run_s / 3, "merge")]
    return sorted(due)


def run(args: argparse.Namespace) -> int:
    specs = [KINESIS_MOCK if args.efo else KINESALITE] + ([MOTO] if args.store == "dynamodb" else [])
    os.environ.setdefault("AWS_ACCESS_KEY_ID", DUMMY_ACCESS_KEY)  # the generator's client: the servers take any
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", DUMMY_SECRET_KEY)
    with common.local_aws(args, *specs) as aws, tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        work = Path(tmp)
        server = aws.kinesis_mock if args.efo else aws.kinesalite
        direct = getattr(server, "direct", server)  # setting up, resharding and the check: not what is measured
        kinesis = direct.client("kinesis")
        streams = (
            create_stream(kinesis, unique_name("soak-src"), args.shards),
            create_stream(kinesis, unique_name("soak-sink"), args.shards),
        )
        table = unique_name("soakmeta")
        driver = Driver(driver_config(args, server, aws, work, streams, table), work)
        try:
            return _soak(args, aws, server, kinesis, streams, table, driver)
        finally:
            driver.abandon()


def _soak(args, aws, server, kinesis, streams: tuple[str, str], table: str, driver: Driver) -> int:
    """The run proper (``run`` cleans up): driver, sampler, sender, the scheduled kills and reshards, the check."""
    work = driver.work
    driver.start()
    driver.wait_started()
    sent_ids: Counter[str] = Counter()
    sent = [0]
    sampler = Sampler(driver, sent, store_gauge(args, aws, work, table), args.sample_s)
    sampler.start()
    sender, result = send_in_background(streams[0], server, args, sent_ids, sent)
    notes: list[str] = []
    reshards: list[tuple[float, str]] = []
    for at_s, event in events_due(args):
        while sampler.elapsed() < at_s and sender.is_alive():
            time.sleep(1)
        if not sender.is_alive():  # the sender stopped early: the run ends with what was sent
            break
        if event == "restart":
            if args.kill_at == "written":
                killed = f"driver SIGKILLed {driver.kill_when_written(sampler.elapsed())}; restarted"
            else:
                driver.kill(sampler.elapsed())
                killed = "driver SIGKILLed and restarted"
            driver.start()
            notes.append(f"{at_s / 60:.1f} min: {killed}")
        else:
            reshards.append((sampler.elapsed(), event))
            notes.append(f"{at_s / 60:.1f} min: {reshard(kinesis, streams[0], merge=event == 'merge')}")
    sender.join()
    if "error" in result:
        notes.append(f"{sampler.elapsed() / 60:.1f} min: the sender stopped: {result['error']}")
    # Drain to what the source stream holds, not to what the sender saw acknowledged: a put it timed out on may
    # still have been stored (after the query would have stopped, were it drained to the sender's count).
    source_ids = StreamIds(kinesis, streams[0])
    owed = Counter(source_ids())
    delivered = FileSinkIds(work / "out") if args.sink == "file" else StreamIds(kinesis, streams[1])

    drain_deadline = time.monotonic() + 300
    checks = 0
    while not drained(sampler.read_so_far(), owed, delivered if checks % 10 == 9 else None):
        if time.monotonic() >= drain_deadline:
            break
        checks += 1
        time.sleep(1)
    time.sleep(3)  # the last batch's sink commit
    sampler.done.set()
    sampler.join()
    sampler.samples.append(sampler.sample())
    driver.stop()
    got = delivered()
    held = source_ids()  # and what was stored since (a put the sender timed out on)
    errors = driver.errors()
    tally = Tally.of(sent_ids, held, got)
    if args.sink == "kinesis":
        notes.append(replay_line(args, work))
    return report(args, sampler.samples, driver.restarts, reshards, notes, tally, errors, aws, sampler.outliers)


SKIPPED = re.compile(r"batch (\d+) committed: .*?; (\d+) records in (\d+) partitions not sent again")
REWRITTEN = re.compile(r"batch (\d+) committed: .*?; (\d+) partitions written again although")


def replay_line(args: argparse.Namespace, work: Path) -> str:
    """What the sink's commit lines in the drivers' logs say of replayed batches (``--skip-replayed``)."""
    if not args.skip_replayed:
        return "replayed partitions: written again (kinesis.sink.skipReplayedPartitions off)"
    text = "\n".join(path.read_text(errors="replace") for path in sorted(work.glob("driver-*.log")))
    skipped = [(int(records), int(partitions)) for _, records, partitions in SKIPPED.findall(text)]
    rewritten = sum(int(partitions) for _, partitions in REWRITTEN.findall(text))
    return (
        f"replayed partitions: skipped {sum(p for _, p in skipped):,} holding {sum(r for r, _ in skipped):,} records "
        f"in {len(skipped)} batches; {rewritten} written again with other rows (kinesis.sink.skipReplayedPartitions)"
    )


def rejudge(args: argparse.Namespace) -> int:
    """Judge a recorded run again with today's gauges and bounds: its restarts from the samples (a new driver
    incarnation), its reshards from the schedule the same flags give (``--minutes``, ``--no-reshard``)."""
    samples = read_csv(Path(args.rejudge))
    restarts = [now.t_s for before, now in itertools.pairwise(samples) if now.incarnation != before.incarnation]
    reshards = [(at, event) for at, event in events_due(args) if event != "restart"]
    warm_up, kept, found, flat = verdict_on_gauges(args, samples, restarts, reshards)
    print(f"re-judged {args.rejudge}: warm-up {warm_up:.0f} s; {len(kept)} of {len(samples)} samples judged")
    print("\n".join(gauge_lines(found)))
    print(f"bounded: {'yes' if flat else 'NOT shown'}")
    recorded = Path(args.rejudge).with_suffix(".txt")
    first_line = recorded.read_text().splitlines()[0] if recorded.exists() else f"soak: {args.minutes:g} min"
    title = f"{first_line} (re-judged)"
    png = Path(args.rejudge).with_suffix(".png")
    if plot(samples, warm_up, restarts, [at for at, _ in reshards], found, png, title):
        print(f"plot: {png}")
    return 0 if flat else 1


def report(args, samples, restarts, reshards, notes, tally: Tally, errors, aws, outliers: list[str]) -> int:
    warm_up, kept, found, flat = verdict_on_gauges(args, samples, restarts, reshards)
    allowed_duplicates = args.sink == "kinesis" and bool(restarts)  # at-least-once across a kill
    exact = (
        tally.lost_by_source == 0
        and tally.missing == 0
        and tally.unexpected == 0
        and (tally.duplicated == 0 or allowed_duplicates)
        and not errors
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    transport = "enhanced fan-out, kinesis-mock" if args.efo else "GetRecords, kinesalite"
    title = (
        f"soak: {args.rate:,.0f} records/s for {args.minutes:g} min, {transport}, {args.store} store, "
        f"{args.sink} sink, driver {args.driver_memory}, {len(restarts)} restarts"
    )
    lines = [title, *notes]
    lines += tally.lines()
    lines.append(f"driver errors: {errors or 'none'}")
    judged_note = f"{len(kept)} of {len(samples)} samples judged (none within {REWARM_S:.0f} s after a restart)"
    lines.append(f"warm-up: first {warm_up:.0f} s; {judged_note}")
    lines += gauge_lines(found)
    lines.append(
        f"bounded: {'yes' if flat else 'NOT shown'}; records: {'as documented' if exact else 'NOT as documented'}"
    )
    write_csv(samples, out / "soak.csv")
    plotted = plot(samples, warm_up, restarts, [at for at, _ in reshards], found, out / "soak.png", title)
    lines.append(
        f"wrote {out / 'soak.csv'}" + (f" and {out / 'soak.png'}" if plotted else " (no plot: pip install matplotlib)")
    )
    (out / "soak_heap_outliers.txt").write_text("\n".join(outliers) or "none\n")
    lines.append(
        f"heap after GC: {len(outliers)} samples more than {GAUGES['jvm_heap_after_gc_mb']:.0f} MiB above their "
        f"driver's lowest; class histograms in {out / 'soak_heap_outliers.txt'}"
    )
    lines.append(aws.quota_summary() or "quotas: not enforced (--no-quotas)")
    lines.append("verdict: " + ("PASS" if exact and flat else "FAIL"))
    text = "\n".join(lines)
    (out / "soak.txt").write_text(text + "\n")
    print("\n" + text)
    return 0 if exact and flat else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument(
        "--rate", type=float, help=f"records/s (default {RATE:,.0f}; with --efo {EFO_RATE:,.0f}: kinesis-mock's pace)"
    )
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--restart-every", type=float, default=15.0, help="minutes between driver kills (0: none)")
    parser.add_argument(
        "--kill-at",
        choices=("schedule", "written"),
        default="schedule",
        help="each kill on its minute, or at the first task to finish a batch after it (a replay writes twice)",
    )
    parser.add_argument("--shards-per-partition", type=int, help="the source's kinesis.shardsPerPartition")
    parser.add_argument("--no-reshard", action="store_true", help="no split and merge of the source stream")
    parser.add_argument("--efo", action="store_true", help="enhanced fan-out (kinesis-mock instead of kinesalite)")
    parser.add_argument("--store", choices=("path", "dynamodb"), default="path", help="the metadata store")
    parser.add_argument("--sink", choices=("kinesis", "file"), default="kinesis")
    parser.add_argument(
        "--skip-replayed", action="store_true", help="the kinesis sink with kinesis.sink.skipReplayedPartitions"
    )
    parser.add_argument("--driver-memory", default="1g", help="spark.driver.memory: the heap's fixed ceiling")
    parser.add_argument("--sample-s", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--out", default=str(RESULTS), help="where soak.{txt,csv,png} go")
    parser.add_argument(
        "--rejudge", metavar="CSV", help="judge a recorded soak.csv again (with the run's flags) and print the verdict"
    )
    common.add_quota_flag(parser)
    args = parser.parse_args(argv)
    if args.rate is None:
        args.rate = EFO_RATE if args.efo else RATE
    if args.minutes <= 0 or args.rate <= 0 or args.shards < 2 or args.sample_s <= 0:
        parser.error("--minutes, --rate and --sample-s must be > 0 and --shards >= 2 (the merge needs two shards)")
    return rejudge(args) if args.rejudge else run(args)


if __name__ == "__main__":
    raise SystemExit(main())
