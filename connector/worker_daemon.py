"""A pyspark daemon that imports the connector's read path once, before it forks Python workers.

pyspark's own daemon forks a worker per task slot and leaves each to import what its task needs: for a Kinesis
read, pyspark's worker, pyarrow, botocore and this package, about 0.3-0.4 s of CPU per worker, paid again by every
worker a query starts. Forked from this daemon, a worker starts with them loaded (docs/source.md, "A light start
per Python worker").

Who uses it: Spark, on every executor, when the session sets
``spark.python.daemon.module=pyspark_aws_kinesis.worker_daemon`` (``DAEMON_CONF``); Spark runs it as
``python -m`` with pyspark's arguments, which pass through to pyspark's daemon unchanged. A module that fails to
import here is left to the worker, as without this daemon, and named on the daemon's stderr (the executor's log).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

DAEMON_CONF = {"spark.python.daemon.module": __name__}

# What a worker's first GetRecords imports (tests/connector/test_worker_daemon.py checks it against a fresh
# worker's path). pyarrow starts two idle native threads with fork handlers (docs/source.md, the trade).
PRELOADED = (
    "pyspark.worker",
    "pyarrow",
    "pyarrow.pandas_compat",  # pyarrow imports these two with the first record batch
    "pyarrow.vendored.version",
    "botocore.session",
    "botocore.client",
    "pyspark_aws_kinesis.source.stream_reader",
    "pyspark_aws_kinesis.source.batch_reader",
    "pyspark_aws_kinesis.fetch.range",
    "pyspark_aws_kinesis.fetch.polling.transport",
    "pyspark_aws_kinesis.fetch.decode",
    "pyspark_aws_kinesis.aws.clients",
)
# Imported when installed: pyarrow imports pandas with the first ``pa.array`` of a decode (fetch.arrow_columns).
OPTIONAL = ("pandas",)


def preload(modules: tuple[str, ...] = PRELOADED) -> list[str]:
    """Import ``modules``; the lines naming those that failed (each is left to the workers to import)."""
    failed = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:  # a worker that needs it fails on its own, with its own error
            failed.append(f"{__name__}: not preloaded: {name}: {type(exc).__name__}: {exc}")
    return failed


def main() -> None:
    installed = tuple(name for name in OPTIONAL if importlib.util.find_spec(name) is not None)
    for line in preload(PRELOADED + installed):
        print(line, file=sys.stderr)
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    main()
