"""Helpers for the GetRecords transport's tests: a simulated clock, a one-shard stream with records, a reader client,
one range read."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from localaws import LocalServer
from localaws.streams import put_records
from pyspark_aws_kinesis.aws.clients import kinesis_reader_client
from pyspark_aws_kinesis.fetch.decode import ShardContext
from pyspark_aws_kinesis.fetch.polling.transport import GetRecordsTransport
from pyspark_aws_kinesis.fetch.range import FetchLimits, ShardRange, ShardTask
from pyspark_aws_kinesis.positions import Position
from pyspark_aws_kinesis.shards import list_shards
from tests.connector.support.source_util import client_settings

INTERVAL_S = 0.2


class SimulatedClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _reader_client(server: LocalServer) -> Any:
    return kinesis_reader_client(client_settings(server))


def _shard_with(server: LocalServer, lite_stream, records: int) -> tuple[ShardContext, list[str]]:
    """A 1-shard stream holding ``records`` records; its context and the records' sequence numbers."""
    stream = lite_stream(shards=1)
    kinesis = server.client("kinesis")
    put = put_records(kinesis, stream, [(f"r{i}".encode(), f"k{i}") for i in range(records)])
    shard = list_shards(kinesis, stream)[0]
    return ShardContext(stream, shard.shard_id, shard.starting_hash_key, shard.ending_hash_key), [
        entry["SequenceNumber"] for entry in put
    ]


def _read_range(
    transport: GetRecordsTransport,
    context: ShardContext,
    start: Position,
    on_slice: Callable[[list[str]], None] = lambda rows: None,
    **kwargs: Any,
):
    """The rows of one range read and its result; ``on_slice(rows so far)`` runs while the range holds a page."""
    task = ShardTask(context.stream_name, context.shard_id, context.starting_hash_key, context.ending_hash_key, start)
    limits = kwargs.pop("limits", FetchLimits())
    shard_range = ShardRange(task, limits, context, **kwargs)
    rows: list[str] = []
    for page, first, stop in shard_range.slices(transport):
        rows += page.sequences[first:stop]
        on_slice(rows)
    assert shard_range.result is not None
    return rows, shard_range.result
