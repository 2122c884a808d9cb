"""GetRecords records -> user records (KPL de-aggregation) -> Arrow RecordBatches in the source's schema.

Who calls it: ``fetch.polling`` on executors, for each GetRecords answer of one shard. ``source`` takes the
schema from here. The RecordBatches must match Spark's Arrow form of ``SCHEMA_DDL`` exactly (``string`` not
``large_string``, ``timestamp('us', tz='UTC')``, all fields nullable) or Spark refuses them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from connector.kpl import KplFormatError, deaggregate, is_aggregated

SCHEMA_DDL = (
    "data BINARY, streamName STRING, partitionKey STRING, sequenceNumber STRING, subSequenceNumber BIGINT, "
    "shardId STRING, approximateArrivalTimestamp TIMESTAMP"
)
ARROW_SCHEMA = pa.schema(
    [
        pa.field("data", pa.binary()),
        pa.field("streamName", pa.string()),
        pa.field("partitionKey", pa.string()),
        pa.field("sequenceNumber", pa.string()),
        pa.field("subSequenceNumber", pa.int64()),
        pa.field("shardId", pa.string()),
        pa.field("approximateArrivalTimestamp", pa.timestamp("us", tz="UTC")),
    ]
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


class CorruptAggregateError(ValueError):
    """A KPL aggregate that cannot be unpacked, with where it is (stream, shard, sequence number)."""


@dataclass(frozen=True)
class ShardContext:
    """What decoding needs to know about the shard being read."""

    stream_name: str
    shard_id: str
    starting_hash_key: int
    ending_hash_key: int
    deaggregate: bool = True
    pass_through_corrupt: bool = False


@dataclass(frozen=True)
class UserRow:
    """One output row before it goes into a RecordBatch."""

    data: bytes
    partition_key: str
    sequence_number: str
    sub_sequence_number: int
    arrival_us: int | None


def arrival_micros(value: datetime | None) -> int | None:
    """Microseconds since the epoch of botocore's (timezone-aware) arrival timestamp."""
    if value is None:
        return None
    return (value - _EPOCH) // _MICROSECOND


def user_rows(record: dict[str, Any], shard: ShardContext) -> Iterator[UserRow]:
    """The user records in one Kinesis record (from botocore's GetRecords answer), in sub-sequence order.

    Sub-records whose hash key is outside the shard's range are dropped, as the KPL format prescribes (after a
    reshard, an aggregate routed by its first record may carry records that belong to another shard, which the
    KPL puts again there). A corrupt aggregate raises CorruptAggregateError unless ``pass_through_corrupt``.
    """
    data: bytes = record["Data"]
    sequence = record["SequenceNumber"]
    arrival = arrival_micros(record.get("ApproximateArrivalTimestamp"))
    if not (shard.deaggregate and is_aggregated(data)):
        yield UserRow(data, record["PartitionKey"], sequence, 0, arrival)
        return
    try:
        unpacked = deaggregate(data)
    except KplFormatError as exc:
        if shard.pass_through_corrupt:
            yield UserRow(data, record["PartitionKey"], sequence, 0, arrival)
            return
        raise CorruptAggregateError(
            f"corrupt KPL aggregate in stream '{shard.stream_name}' shard {shard.shard_id} at sequence number "
            f"{sequence}: {exc} (set kinesis.kpl.passThroughCorruptAggregates=true to return it as-is)"
        ) from exc
    for user in unpacked:
        if shard.starting_hash_key <= user.hash_key <= shard.ending_hash_key:
            yield UserRow(user.data, user.partition_key, sequence, user.sub_sequence_number, arrival)


class BatchBuilder:
    """Collects UserRows of one shard into column lists and turns them into one RecordBatch."""

    def __init__(self, shard: ShardContext):
        self.shard = shard
        self._reset()

    def _reset(self) -> None:
        self._data: list[bytes] = []
        self._keys: list[str] = []
        self._sequences: list[str] = []
        self._subs: list[int] = []
        self._arrivals: list[int | None] = []

    def __len__(self) -> int:
        return len(self._data)

    def append(self, row: UserRow) -> None:
        self._data.append(row.data)
        self._keys.append(row.partition_key)
        self._sequences.append(row.sequence_number)
        self._subs.append(row.sub_sequence_number)
        self._arrivals.append(row.arrival_us)

    def extend(self, rows: Iterable[UserRow]) -> None:
        for row in rows:
            self.append(row)

    def build(self) -> pa.RecordBatch:
        """The collected rows as a RecordBatch in ARROW_SCHEMA; the builder is empty afterwards."""
        count = len(self._data)
        columns = [
            pa.array(self._data, pa.binary()),
            pa.array([self.shard.stream_name] * count, pa.string()),
            pa.array(self._keys, pa.string()),
            pa.array(self._sequences, pa.string()),
            pa.array(self._subs, pa.int64()),
            pa.array([self.shard.shard_id] * count, pa.string()),
            pa.array(self._arrivals, pa.timestamp("us", tz="UTC")),
        ]
        self._reset()
        return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)
