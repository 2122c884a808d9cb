"""The batch reader: ``spark.read.format("aws-kinesis")`` reads a bounded range of every shard.

Who calls what: Spark builds the reader on the driver at ``load()``; ``partitions()`` lists the shards and fixes
the range; ``read(partition)`` runs on executors. The range is ``kinesis.startingPosition`` (default
TRIM_HORIZON for batch reads) to ``kinesis.endingPosition``: ``LATEST`` stops each shard at the first record
that arrived after planning (or when caught up), a JSON map stops a shard after the given record (inclusive).
A task that runs again reads the same range: nothing in it depends on when it runs.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from .. import options as opts
from ..aws.clients import kinesis_client
from ..clock import now_ms
from ..fetch.range import FetchLimits, ShardTask
from ..freed_memory import release_freed_memory
from ..options import OptionError
from ..positions import LATEST, TRIM_HORIZON, Position, PositionSpec, ShardEnd, shard_entry
from .catalog import ShardCatalog
from .settings import SourceSettings
from .side_by_side import side_by_side


@dataclass(frozen=True)
class BatchPartition(InputPartition):
    """One Spark task of a batch read: shards with their start and optional inclusive end."""

    tasks: tuple[tuple[ShardTask, ShardEnd | None], ...]
    stop_after_ms: int | None


class KinesisBatchReader(DataSourceReader):
    """``spark.read.format("aws-kinesis")``: see the module doc."""

    def __init__(self, schema: StructType, options: dict[str, str]):
        self.settings = SourceSettings.from_options(options)
        self.ends = self.settings.ends()
        starting = self.settings.starting
        # LATEST would make a batch read empty: without an explicit start, a batch read starts at the oldest record.
        self.starting = starting if self.settings.starting_given else PositionSpec(Position(TRIM_HORIZON))
        if self.starting.default.kind == LATEST or any(p.kind == LATEST for p in self.starting.per_shard.values()):
            raise OptionError(
                f"option {opts.STARTING_POSITION.name}=LATEST makes a batch read empty: use TRIM_HORIZON, "
                "AT_TIMESTAMP:<time> or per-shard positions"
            )

    def partitions(self) -> Sequence[InputPartition]:
        """Every shard of every stream, with the range fixed now."""
        catalog = ShardCatalog(functools.partial(kinesis_client, self.settings.client), self.settings.client.retry, 0.0)
        stop_after = now_ms() if self.ends is None else None
        tasks = []
        for stream in self.settings.streams:
            for shard in catalog.shards(stream):
                start = self.starting.for_shard(stream, shard.shard_id)
                task = ShardTask(stream, shard.shard_id, shard.starting_hash_key, shard.ending_hash_key, start)
                end = None
                if self.ends is not None:
                    end = shard_entry(self.ends, stream, shard.shard_id, None)
                    if end is None:
                        continue  # an explicit end map reads only the shards it names
                tasks.append((task, end))
        size = self.settings.shards_per_partition
        return [BatchPartition(tuple(tasks[i : i + size]), stop_after) for i in range(0, len(tasks), size)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The partition's shards read side by side (``side_by_side``: a thread each, a bounded queue)."""
        assert isinstance(partition, BatchPartition)
        limits = FetchLimits(stop_after_ms=partition.stop_after_ms)
        shards = [functools.partial(self._read_shard, task, end, limits) for task, end in partition.tasks]
        yield from side_by_side(shards, "batch read")
        release_freed_memory()

    def _read_shard(self, task: ShardTask, end: ShardEnd | None, limits: FetchLimits) -> Iterator[pa.RecordBatch]:
        until = (end.sequence_number, end.sub_sequence_number) if end is not None else None
        shard_range, transport = self.settings.shard_reader(task, limits, until=until)
        yield from shard_range.batches(transport)
