"""``pyspark_aws_kinesis.metrics.progress_metrics``: a query's progress report read generically, refusals reaching
CloudWatch as a total and the most refused shard. Publishing from real queries:
tests/connector/queries/test_metrics.py."""

from __future__ import annotations

import json

from pyspark_aws_kinesis.metrics import AVG_LAG, progress_metrics
from tests.connector.support.metrics_util import JOB, _progress

SOURCE_DIM = ("Source", "0:PythonMicroBatchStream")  # the description without its JVM object id


def test_progress_metrics_read_the_source_report_generically() -> None:
    report = {
        "maxMillisBehindLatest": 500,
        "maxBehindShard": "s|shardId-1",
        "millisBehindLatest": {"s|shardId-0": 100, "s|shardId-1": 500},
        "recordsDroppedOutOfRange": 3,
        "flag": True,
    }
    data = progress_metrics(_progress("q", rows=8, report=report), JOB)
    source = {(d.name, d.unit, d.value) for d in data if SOURCE_DIM in d.dimensions}
    assert source == {
        ("InputRowsPerSecond", "Count/Second", 4.0),
        ("MaxMillisBehindLatest", "Milliseconds", 500.0),
        (AVG_LAG, "Milliseconds", 300.0),
        ("RecordsDroppedOutOfRange", "Count", 3.0),
    }
    assert {(d.name, d.dimensions, d.value) for d in data if ("Query", "q") not in d.dimensions} == {
        ("MaxMillisBehindLatest", tuple(JOB.items()), 500.0)  # the job's roll-up, for alarms
    }
    query = {(d.name, d.value) for d in data if SOURCE_DIM not in d.dimensions and ("Query", "q") in d.dimensions}
    assert query == {
        ("InputRowsPerSecond", 4.0),
        ("ProcessedRowsPerSecond", 2.0),
        ("InputRows", 8.0),
        ("BatchDuration", 1200.0),
    }
    # The report as text (another progress path), or absent (pyspark 4.0.2): parsed, or skipped.
    as_text = progress_metrics(_progress("q", rows=8, report=json.dumps(report)), JOB)  # type: ignore[arg-type]
    assert {d.name for d in as_text} == {d.name for d in data}
    # Another source's offset (or any offset before pyspark 4.2) is no report: its numbers are not metrics.
    file_offset = {d.name for d in progress_metrics(_progress("q", rows=8, report={"logOffset": 4}), JOB)}
    assert (
        file_offset
        == {d.name for d in progress_metrics(_progress("q", rows=8, report=None), JOB)}
        == {
            "InputRowsPerSecond",
            "ProcessedRowsPerSecond",
            "InputRows",
            "BatchDuration",
        }
    )


def test_refusals_reach_cloudwatch_as_a_total_and_the_most_refused_shard() -> None:
    report = {
        "maxMillisBehindLatest": 0,
        "millisBehindLatest": {"s/a": 0, "s/b": 0},
        "refusedCalls": 5,
        "refusedCallsPerShard": {"s/a": 4, "s/b": 1},
    }
    progress = {"id": "q", "sources": [{"description": "src", "latestOffset": report}]}
    published = {(datum.name, datum.unit, datum.value) for datum in progress_metrics(progress, {"Job": "j"})}
    assert ("RefusedCalls", "Count", 5.0) in published
    assert ("MaxRefusedCallsPerShard", "Count", 4.0) in published
