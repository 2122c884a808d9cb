"""``bench.sink_replay`` reads what ``bench.soak`` writes: the kills, the sink's tally, and the skipped partitions
the soak finds in the sink's own commit lines (built here by the code that logs them)."""

from __future__ import annotations

import argparse
import logging
from collections import Counter
from pathlib import Path

import pytest

from bench.sink_replay import Outcome
from bench.soak import Tally, replay_line
from pyspark_aws_kinesis.sink.commit import SinkCommitMessage
from pyspark_aws_kinesis.sink.writer import _log_outcome


def _driver_log(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Two commits of replayed batches as the driver logs them: one with a partition skipped, one rewritten."""
    skipped = SinkCommitMessage(0, query_id="q", skipped_records=700, skipped_partitions=1)
    written = SinkCommitMessage(1, ("out",), 300, query_id="q")
    rewritten = SinkCommitMessage(0, ("out",), 50, query_id="q", rewritten_partitions=1)
    with caplog.at_level(logging.INFO, logger="pyspark_aws_kinesis.sink"):
        _log_outcome("batch 7 committed", [skipped, written])
        _log_outcome("batch 8 committed", [rewritten])
    (tmp_path / "driver-2.log").write_text("\n".join(record.getMessage() for record in caplog.records))


def test_the_outcome_is_read_from_the_soaks_summary(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _driver_log(tmp_path, caplog)
    tally = Tally.of(Counter({"a": 1, "b": 1}), Counter({"a": 1, "b": 1}), Counter({"a": 3, "b": 1}))
    on = argparse.Namespace(skip_replayed=True)
    kills = [
        "0.5 min: driver SIGKILLed after 1 of stage 22's 2 tasks finished; batch 22 uncommitted; restarted",
        "1.0 min: driver SIGKILLed after 2 of stage 9's 2 tasks finished; no batch uncommitted; restarted",
        "1.5 min: driver SIGKILLed no task finished within 120 s; batch 40 uncommitted; restarted",
    ]
    summary = "\n".join(
        ["soak: 1,000 records/s for 10 min, ..., 4 restarts", *kills, *tally.lines(), replay_line(on, tmp_path)]
    )
    outcome = Outcome.parse(True, summary)
    assert (outcome.kills, outcome.uncommitted, outcome.duplicated, outcome.missing) == (4, 2, 2, 0)
    assert outcome.unexpected == 0
    assert (outcome.skipped_partitions, outcome.skipped_records, outcome.rewritten_partitions) == (1, 700, 1)
    off = Outcome.parse(
        False,
        summary.replace(replay_line(on, tmp_path), replay_line(argparse.Namespace(skip_replayed=False), tmp_path)),
    )
    assert (off.kills, off.uncommitted, off.duplicated, off.skipped_records) == (4, 2, 2, 0)


def test_a_soak_without_a_tally_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="no tally"):
        Outcome.parse(False, "Traceback: the soak failed")
