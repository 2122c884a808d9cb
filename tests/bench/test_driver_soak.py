"""The million-trigger driver benchmark, run short: through splits, merges and shards leaving the listing after
the retention, on the simulated clock, every record put is read once and no trigger fails. Its own process: the
simulated clock must be installed before the connector is imported."""

from __future__ import annotations

import csv
import re
import subprocess
import sys

from localaws.servers import LocalServer, project_root


def test_a_short_run_reads_every_record_once_across_reshards_and_expired_shards(kinesalite: LocalServer, tmp_path):
    table = tmp_path / "samples.csv"
    args = ["--triggers", "600", "--shards", "2", "--reshard-every", "100", "--sample-every", "100"]
    args += ["--retention-s", "150", "--csv", str(table), "--plot", "", "--shapes-from", kinesalite.endpoint_url]
    done = subprocess.run(
        [sys.executable, "-m", "bench.driver_soak", *args],
        cwd=project_root(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "verdict: " in done.stdout, done.stdout + done.stderr
    put, read = map(int, re.search(r"records put ([\d,]+), read ([\d,]+)", done.stdout).group(1, 2))
    assert put == read > 300 and "failed triggers 0" in done.stdout
    samples = list(csv.DictReader(table.open()))
    listed = [int(s["listed_shards"]) for s in samples]
    assert len(samples) == 6 and max(listed) > min(listed[2:])  # closed shards left the listing after 150 s
    assert all(float(s["heap_kblocks"]) > 0 and int(s["batches"]) > 0 for s in samples)
    for s in samples:  # the judged CPU gauge is the driver's CPU as a share of the reference workload's
        ratio, cpu, reference = (float(s[k]) for k in ("driver_cpu_per_reference", "driver_cpu_ms", "reference_cpu_ms"))
        assert reference > 0 and abs(ratio - cpu / reference) < 1e-9 * max(1.0, ratio)
