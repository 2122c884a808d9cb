"""Helpers for the CloudWatch publishing tests: the job's dimensions and a query's progress as the listener sees it."""

from __future__ import annotations

from typing import Any

JOB = {"Job": "metrics-test"}


def _progress(name: str, rows: int, report: dict | None = None) -> dict[str, Any]:
    return {
        "id": "8a1d4c3e-0000-0000-0000-000000000001",
        "name": name,
        "batchId": 3,
        "numInputRows": rows,
        "inputRowsPerSecond": rows / 2,
        "processedRowsPerSecond": rows / 4,
        "durationMs": {"triggerExecution": 1200, "latestOffset": 30},
        "sources": [
            {
                "description": "org.apache.spark.sql.execution.datasources.v2.python.PythonMicroBatchStream@41fc4b1f",
                "numInputRows": rows,
                "inputRowsPerSecond": rows / 2,
                "latestOffset": report,
            }
        ],
    }
