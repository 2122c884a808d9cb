"""Duplicates a driver kill leaves in the sink's stream, without and with ``kinesis.sink.skipReplayedPartitions``,
in one run.

Run: ``.venv/bin/python -m bench.sink_replay [--minutes 8] [--restart-every 0.5] [--rate 1000]
[--kill-at written|schedule] [--shards-per-partition 1] [--no-quotas]``; about twice ``--minutes`` plus the drains.

Two soaks (``bench.soak``: GetRecords on kinesalite, two shards, no reshard, the kinesis sink, AWS's quotas), one
after the other, with the same rate and kill schedule: every ``--restart-every`` minutes the driver's process
group is SIGKILLed and restarted on its checkpoint. The first writes replayed batches again (the option off, the
default), the second with the option. For each: the kills, those that left a batch uncommitted (Spark runs it
again), the records in the sink more often than in the source stream (duplicates), per kill, nothing missing; for
the second also the records its replayed batches did not send again (partitions written whole before the kill)
and partitions written again with other rows. What is left with the option is the partitions whose tasks were in
flight at the kill (docs/sink.md, "Skipping replayed partitions").

A kill writes duplicates only when it falls between a batch's first finished task and Spark's commit log entry for
the batch, a small part of a steady batch's second. ``--kill-at written`` (the default) puts each kill there: the
driver kills itself at the first task to finish after the minute (``bench.soak_driver``), and with
``--shards-per-partition 1`` a batch of the two shards has two tasks, so the other is often still writing.
``--kill-at schedule`` kills on the minute, where the phase is chance (the figures then vary with load).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

RESTARTS = re.compile(r"(\d+) restarts")
UNCOMMITTED = re.compile(r"driver SIGKILLed .*; batch \d+ uncommitted")
SINK = re.compile(r"sink: missing ([\d,]+), duplicated ([\d,]+), unexpected ([\d,]+)")
SKIPPED = re.compile(r"replayed partitions: skipped ([\d,]+) holding ([\d,]+) records in (\d+) batches; (\d+) written")


@dataclass(frozen=True)
class Outcome:
    skipping: bool
    kills: int
    uncommitted: int  # kills that left a batch for the restart to run again
    missing: int
    duplicated: int
    unexpected: int
    skipped_partitions: int = 0
    skipped_records: int = 0
    rewritten_partitions: int = 0

    @classmethod
    def parse(cls, skipping: bool, text: str) -> Outcome:
        kills = RESTARTS.search(text)
        sink = SINK.search(text)
        if kills is None or sink is None:
            raise RuntimeError(f"the soak printed no tally:\n{text[-3000:]}")
        counts = [int(value.replace(",", "")) for value in sink.groups()]
        skipped = SKIPPED.search(text)
        extra = (int(skipped[1].replace(",", "")), int(skipped[2].replace(",", "")), int(skipped[4])) if skipped else ()
        return cls(skipping, int(kills[1]), len(UNCOMMITTED.findall(text)), *counts, *extra)

    def line(self) -> str:
        per_kill = self.duplicated / self.kills if self.kills else 0.0
        avoided = (
            f"{self.skipped_records:>9,} in {self.skipped_partitions} partitions; {self.rewritten_partitions} "
            "rewritten with other rows"
            if self.skipping
            else f"{'-':>9}"
        )
        option = "on" if self.skipping else "off"
        return (
            f"{option:<7}{self.kills:>6}{self.uncommitted:>12}{self.duplicated:>12,}{per_kill:>10,.0f}{self.missing:>9,}{self.unexpected:>12,}"
            f"   {avoided}"
        )


def soak(args: argparse.Namespace, skipping: bool, out: Path) -> Outcome:
    command = [sys.executable, "-m", "bench.soak", "--minutes", str(args.minutes), "--rate", str(args.rate)]
    command += ["--restart-every", str(args.restart_every), "--no-reshard", "--sink", "kinesis", "--out", str(out)]
    command += ["--kill-at", args.kill_at, "--shards-per-partition", str(args.shards_per_partition)]
    command += (["--skip-replayed"] if skipping else []) + (["--no-quotas"] if args.no_quotas else [])
    print(f"running: {' '.join(command[1:])}", flush=True)
    done = subprocess.run(command, capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    summary = (out / "soak.txt").read_text() if (out / "soak.txt").exists() else done.stdout + done.stderr[-3000:]
    return Outcome.parse(skipping, summary)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=8.0, help="each soak's length")
    parser.add_argument("--restart-every", type=float, default=0.5, help="minutes between driver kills")
    parser.add_argument("--rate", type=float, default=1000.0, help="records/s into the source stream")
    parser.add_argument("--kill-at", choices=("written", "schedule"), default="written", help="see bench.soak")
    parser.add_argument("--shards-per-partition", type=int, default=1, help="the source's kinesis.shardsPerPartition")
    parser.add_argument("--no-quotas", action="store_true", help="local servers without AWS's Kinesis quotas")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sink-replay-") as tmp:
        outcomes = [soak(args, skipping, Path(tmp) / str(skipping)) for skipping in (False, True)]
    print(
        f"\n{args.rate:,.0f} records/s for {args.minutes:g} min a run, the driver SIGKILLed every "
        f"{args.restart_every:g} min, at {args.kill_at}; {args.shards_per_partition} shards a partition (bench.soak, "
        "GetRecords on kinesalite, kinesis sink)"
    )
    header = f"{'option':<7}{'kills':>6}{'uncommitted':>12}{'duplicated':>12}{'per kill':>10}{'missing':>9}"
    print(f"{header}{'unexpected':>12}   skipped")
    for outcome in outcomes:
        print(outcome.line())
    off, on = outcomes
    if off.duplicated and off.kills and on.kills:
        ratio = (on.duplicated / on.kills) / (off.duplicated / off.kills)
        print(f"duplicates per kill with the option: {ratio:.2f} x without")
    delivered = all(o.missing == 0 and o.unexpected == 0 for o in outcomes)
    print(f"every record delivered: {'yes' if delivered else 'NO'}")
    return 0 if delivered else 1


if __name__ == "__main__":
    sys.exit(main())
