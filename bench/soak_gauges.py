"""What ``bench.soak`` measures, read from outside the processes it measures: ``/proc`` (RSS, threads, file
descriptors, sockets), ``jcmd`` (the driver JVM's heap after a full GC, metaspace, code cache, and the class histogram
of an outlier), directory trees (a path metadata store, the checkpoint) and a DynamoDB table (items and bytes of the
metadata store on moto).

Who calls it: ``bench.soak.Sampler`` every sample. Not a benchmark itself (run_all skips it).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import procfs

SOURCE_RUNNER = b"python_streaming_source_runner"  # pyspark's driver-side Python process of a streaming source
BROKER = b"pyspark_aws_kinesis.fetch.fanout.broker"  # the subscription broker (connector/fetch/fanout/broker.py)
PYSPARK = b"pyspark"
JCMD_TIMEOUT_S = 30


@dataclass(frozen=True)
class ProcessGauge:
    """One process (or the sum over several): RSS, threads, open file descriptors, of them sockets."""

    rss_mb: float = 0.0
    threads: int = 0
    fds: int = 0
    sockets: int = 0
    count: int = 0

    def __add__(self, other: ProcessGauge) -> ProcessGauge:
        return ProcessGauge(
            self.rss_mb + other.rss_mb,
            self.threads + other.threads,
            self.fds + other.fds,
            self.sockets + other.sockets,
            self.count + other.count,
        )


def process(pid: int | None) -> ProcessGauge:
    """The gauges of ``pid`` (all zero when it is gone or None)."""
    if pid is None:
        return ProcessGauge()
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return ProcessGauge()
    links = []
    for fd in fds:
        try:
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:  # closed since the listing
            continue
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    rss_kb = int(fields.get("VmRSS", "0 kB").split()[0])
    sockets = sum(link.startswith("socket:") for link in links)
    return ProcessGauge(rss_kb / 1024, int(fields.get("Threads", "0")), len(links), sockets, 1)


def total(pids: list[int]) -> ProcessGauge:
    found = ProcessGauge()
    for pid in pids:
        found = found + process(pid)
    return found


def descendants(root: int) -> list[int]:
    """Every live process below ``root`` (from /proc's parent links)."""
    return procfs.below(root, dict(procfs.stat_fields()))


def command(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def python_roles(jvm_pid: int) -> tuple[list[int], list[int]]:
    """(streaming source runners, other pyspark processes: the daemon and its workers) the driver JVM started."""
    runners, workers = [], []
    for pid in descendants(jvm_pid):
        line = command(pid)
        if SOURCE_RUNNER in line:
            runners.append(pid)
        elif PYSPARK in line:
            workers.append(pid)
    return runners, workers


def brokers(work: Path) -> list[int]:
    """Subscription brokers serving this run (their command line names the run's broker directory)."""
    mark = str(work).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            line = command(int(entry.name))
            if BROKER in line and mark in line:
                found.append(int(entry.name))
    return found


@dataclass(frozen=True)
class JvmGauge:
    """The driver JVM after a full GC (MiB): the heap the GC left (old and humongous regions), what the query
    allocated again before the heap was read (young regions), metaspace used, code cache used."""

    heap_after_gc_mb: float = 0.0
    young_after_gc_mb: float = 0.0
    metaspace_mb: float = 0.0
    code_cache_mb: float = 0.0


# One attach session runs all three: with ``jcmd`` started once per command, a second or more could pass between
# the GC and the reading (a JVM starts for each), and a busy query allocates tens of MiB in that time.
JCMD_COMMANDS = "GC.run\nGC.heap_info\nCompiler.codecache\n"


def _jcmd_session(pid: int, commands: str) -> str:
    """Run ``commands`` (one per line) in one ``jcmd -f`` session and return what they printed."""
    with tempfile.NamedTemporaryFile("w", suffix=".jcmd") as script:
        script.write(commands)
        script.flush()
        answer = subprocess.run(
            ["jcmd", str(pid), "-f", script.name], capture_output=True, text=True, timeout=JCMD_TIMEOUT_S, check=False
        )
    return answer.stdout


def jvm(pid: int | None) -> JvmGauge:
    """``GC.run`` (a full GC: what is left is what the JVM holds), then ``GC.heap_info`` and ``Compiler.codecache``
    in one session; zeros when the JVM is gone or jcmd fails. The code cache is the sum of each code heap's
    ``used=`` (not its ``max_used=``, which the earlier reading added in, doubling the figure)."""
    if pid is None:
        return JvmGauge()
    try:
        return parse_jvm(_jcmd_session(pid, JCMD_COMMANDS))
    except (OSError, subprocess.TimeoutExpired):
        return JvmGauge()


def parse_jvm(printed: str) -> JvmGauge:
    """The gauge from ``GC.heap_info`` and ``Compiler.codecache`` output. With G1 (the JVM's default on a server
    class machine) the young regions in use are what was allocated after the full GC: they are not counted as
    what the GC left. The generational collectors (Serial, Parallel) empty their young generation in a full GC:
    what the old one holds is what it left. Any other output reads as zeros, never a guess."""
    heap_used = re.search(r"heap\s+total \d+K, used (\d+)K", printed)
    young = re.search(r"\d+ young \((\d+)K\)", printed)
    generation = r"^\s*(?:{})\s+total \d+K, used (\d+)K"
    young_generation = re.search(generation.format("def new generation|PSYoungGen"), printed, re.M)
    old_generation = re.search(generation.format("tenured generation|ParOldGen"), printed, re.M)
    metaspace = re.search(r"Metaspace\s+used (\d+)K", printed)
    code_used = sum(int(kb) for kb in re.findall(r"\bused=(\d+)Kb", printed))
    if heap_used:
        used_kb = int(heap_used.group(1))
        young_kb = min(int(young.group(1)), used_kb) if young else 0
        left_kb = used_kb - young_kb
    elif young_generation and old_generation:
        young_kb, left_kb = int(young_generation.group(1)), int(old_generation.group(1))
    else:
        young_kb = left_kb = 0
    return JvmGauge(
        left_kb / 1024,
        young_kb / 1024,
        int(metaspace.group(1)) / 1024 if metaspace else 0.0,
        code_used / 1024,
    )


def class_histogram(pid: int, top: int = 15) -> str:
    """The ``top`` classes by bytes held, after a full GC (``GC.class_histogram``): what a heap outlier is made of."""
    try:
        printed = _jcmd_session(pid, "GC.class_histogram\n")
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = [line for line in printed.splitlines() if re.match(r"\s*(\d+:|Total)", line)]
    return "\n".join(lines[:top] + lines[-1:])


def tree(root: Path) -> tuple[int, float]:
    """(files, MiB) under ``root``."""
    files, size = 0, 0
    for directory, _dirs, names in os.walk(root):
        for name in names:
            try:
                size += os.stat(os.path.join(directory, name)).st_size
                files += 1
            except OSError:  # deleted while we walked (a purge)
                continue
    return files, size / 2**20


def table(dynamodb: Any, name: str) -> tuple[int, float]:
    """(items, MiB of their bodies) in a DynamoDB table (a Scan: small tables only, as the metadata store is)."""
    items, size = 0, 0
    request: dict[str, Any] = {"TableName": name}
    while True:
        try:
            answer = dynamodb.scan(**request)
        except dynamodb.exceptions.ResourceNotFoundException:
            return 0, 0.0
        items += answer["Count"]
        size += sum(len(item.get("body", {}).get("S", "")) for item in answer["Items"])
        if "LastEvaluatedKey" not in answer:
            return items, size / 2**20
        request["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
