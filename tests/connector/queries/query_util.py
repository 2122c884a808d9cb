"""Helpers for the query tests: what a file sink committed."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlparse

import pyarrow.parquet as pq


def _committed(spark, path: Path) -> list[bytes]:
    """The records a file sink committed: the files its _spark_metadata log lists (read without a Spark job, so
    polling does not slow the query down)."""
    log = path / "_spark_metadata"
    files: set[str] = set()
    for entry in sorted(log.iterdir()) if log.exists() else []:
        if entry.name.startswith("."):
            continue
        for line in entry.read_text().splitlines()[1:]:  # the first line is the log's version
            item = json.loads(line)
            if item.get("action") == "add":
                files.add(item["path"])
    return [value for file in sorted(files) for value in pq.read_table(urlparse(file).path)["data"].to_pylist()]
