"""Helpers for running the sample jobs end to end against kinesalite on the session's SparkSession."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from localaws import LocalServer
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY
from localaws.streams import put_records, read_stream
from pyspark_aws_kinesis import kpl
from spark_app import common

# The session's Spark workers were started without AWS credentials in their environment: pass the local
# servers' dummy keys as connector options, the way a job on a machine without a credential chain would.
CREDENTIALS = [f"kinesis.awsAccessKeyId={DUMMY_ACCESS_KEY}", f"kinesis.awsSecretKey={DUMMY_SECRET_KEY}"]


def event(i: int, country: str, date: str) -> bytes:
    return json.dumps({"id": i, "data": country, "date": date}).encode()


def user_records(kinesis, stream: str) -> list[tuple[bytes, str]]:
    """(data, partition key) of every user record in ``stream``, KPL aggregates unpacked."""
    out: list[tuple[bytes, str]] = []
    for record in read_stream(kinesis, stream):
        if kpl.is_aggregated(record["Data"]):
            out += [(user.data, user.partition_key) for user in kpl.deaggregate(record["Data"])]
        else:
            out.append((record["Data"], record["PartitionKey"]))
    return out


def dead_letters(path: Path) -> list[dict]:
    return [json.loads(line) for f in sorted(path.glob("batch_id=*/*.json")) for line in f.read_text().splitlines()]


class JobRunner:
    """Builds a job's command line for kinesalite streams and runs its queries on the shared session."""

    def __init__(self, spark, kinesalite: LocalServer, tmp_path: Path):
        self.spark = spark
        self.kinesis = kinesalite.client("kinesis")
        self.endpoint_url = kinesalite.endpoint_url
        self.checkpoint = tmp_path / "checkpoint"
        self.dead_letter_path = tmp_path / "dead-letter"

    def put(self, payloads: list[bytes], stream: str) -> None:
        put_records(self.kinesis, stream, [(data, f"key-{i % 7}") for i, data in enumerate(payloads)])

    def args(self, module: ModuleType, source: str, sink: str | None, *extra: str) -> Any:
        argv = [
            "--source-stream", source,
            "--region", "us-east-1",
            "--endpoint-url", self.endpoint_url,
            "--checkpoint-location", str(self.checkpoint),
            "--dead-letter-path", str(self.dead_letter_path),
            *[arg for option in CREDENTIALS for arg in ("--source-option", option)],
            *[arg for option in CREDENTIALS for arg in ("--sink-option", option)],
            *(["--sink-stream", sink] if sink else []),
            *extra,
        ]  # fmt: skip
        return common.parse_job_args(module.parser(), argv, needs_sink=False)

    def run_available_now(self, module: ModuleType, source: str, sink: str | None, *extra: str) -> None:
        """Start the job with ``--available-now`` and wait until each of its queries has finished cleanly."""
        queries = module.start(self.spark, self.args(module, source, sink, "--available-now", *extra))
        for query in queries:
            query.awaitTermination(180)
            assert not query.isActive, f"{query.name} still running after 180 s"
            assert query.exception() is None, query.exception()


@pytest.fixture
def jobs(spark, kinesalite, tmp_path: Path) -> Iterator[JobRunner]:
    # The jobs format window bounds in the session time zone; the checks compute them in UTC.
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    yield JobRunner(spark, kinesalite, tmp_path)
    spark.conf.set("spark.sql.session.timeZone", previous)


EventFactory = Callable[[int, str, str], bytes]
