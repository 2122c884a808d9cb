"""GetRecords answers and SubscribeToShard events -> user records (KPL de-aggregation) as columns -> Arrow batches.

Who calls it: ``polling`` and ``fanout`` (the two transports), for each answer or event of one shard, and
``datasource`` for the schema. The reader's client hands over the raw body, which msgspec decodes straight into
typed structs, the base64 data in the same C pass (why, and what each step costs: docs/source.md, "Fast decoding").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import KinesisConnectorError
from ..kpl import MAGIC, KplFormatError, Unpacked, hash_key_of, is_aggregated, unpack
from ..positions import shard_label
from ..record_sizes import LARGE_RECORD_BYTES, large_records
from ..shards import MAX_HASH_KEY
from ..stream_ids import stream_name
from .arrow_columns import arrival_us, arrivals_column, scalar, value_bytes
from .arrow_columns import binary_column as _binary_column
from .arrow_columns import int64_array as _int64_array
from .arrow_columns import string_array as _string_array

ARRIVAL_TYPE = pa.timestamp("us", tz="UTC")
# Spark's Arrow form of schema.SCHEMA_DDL exactly (``string`` not ``large_string``, all fields nullable),
# or Spark refuses it.
ARROW_SCHEMA = pa.schema(
    [
        pa.field("data", pa.binary()),
        pa.field("streamName", pa.string()),
        pa.field("partitionKey", pa.string()),
        pa.field("sequenceNumber", pa.string()),
        pa.field("subSequenceNumber", pa.int64()),
        pa.field("shardId", pa.string()),
        pa.field("approximateArrivalTimestamp", ARRIVAL_TYPE),
    ]
)


class _Record(msgspec.Struct, gc=False):
    """One Kinesis record as GetRecords answers and SubscribeToShardEvents carry it (JSON 1.1).

    ``Data`` is base64 on the wire: msgspec decodes it and refuses what is not base64 (botocore would skip such
    characters). ``gc=False``: the structs hold no containers, so the garbage collector need not track them.
    """

    Data: bytes
    PartitionKey: str
    SequenceNumber: str
    ApproximateArrivalTimestamp: float | None = None  # epoch seconds, millisecond precision; always sent by AWS


class _GetRecordsAnswer(msgspec.Struct):
    """The fields of a GetRecords answer we use (``ChildShards`` comes from ListShards instead)."""

    Records: list[_Record] | None = None
    NextShardIterator: str | None = None  # None (or absent): the shard is closed and read to its end
    MillisBehindLatest: int | None = None


class _SubscribeToShardEvent(msgspec.Struct):
    """The fields of a SubscribeToShardEvent we use."""

    Records: list[_Record] | None = None
    ContinuationSequenceNumber: str | None = None  # None (or absent): the shard has ended
    MillisBehindLatest: int | None = None


_Answer = TypeVar("_Answer", _GetRecordsAnswer, _SubscribeToShardEvent)
_GET_RECORDS = msgspec.json.Decoder(_GetRecordsAnswer)
_SUBSCRIBE_EVENT = msgspec.json.Decoder(_SubscribeToShardEvent)


class MalformedAnswerError(KinesisConnectorError, ValueError):
    """A GetRecords answer or SubscribeToShardEvent that is not what Kinesis sends (bad JSON, bad base64, a
    record without a required field), with which shard's answer it was."""


class CorruptAggregateError(KinesisConnectorError, ValueError):
    """A KPL aggregate that cannot be unpacked, with where it is (stream, shard, sequence number)."""


@dataclass(frozen=True)
class ShardContext:
    """What decoding needs to know about the shard being read."""

    stream_name: str  # the stream's id: its name, or its ARN (``stream_ids``); rows carry the name
    shard_id: str
    starting_hash_key: int
    ending_hash_key: int
    deaggregate: bool = True
    pass_through_corrupt: bool = False

    @property
    def label(self) -> str:
        """How messages name the shard (``positions.shard_label``)."""
        return shard_label(self.stream_name, self.shard_id)


def sequence_key(sequence_number: str) -> tuple[int, str]:
    """Orders decimal sequence numbers like ints without converting them (they have no leading zeros)."""
    return len(sequence_number), sequence_number


@dataclass
class Page:
    """The user records of one GetRecords answer, one list entry per user record (columns, not row objects).

    ``record_ends[i]`` is True when row ``i`` is the last user record of its Kinesis record (always, for plain
    records); ``kinesis_records`` counts the Kinesis records of the answer, before de-aggregation and filtering,
    ``last_sequence`` is the sequence number of its last Kinesis record (where a transport resumes) and
    ``dropped_out_of_range`` the KPL sub-records dropped because their hash key is outside the shard's range.
    ``next_iterator`` is the transport's continuation (GetRecords' NextShardIterator); None means the shard is
    closed and this page holds its last records. ``at_tip``: the transport knows nothing more waits after this
    page (GetRecords: fewer records than its Limit and MillisBehindLatest 0), so a read need not ask again.
    ``called_ms``: when the call that brought the page started (GetRecords), which is as of when ``at_tip`` and
    ``next_iterator`` hold.
    """

    data: list[bytes] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    sequences: list[str] = field(default_factory=list)
    subs: list[int] = field(default_factory=list)
    arrivals_us: list[int | None] = field(default_factory=list)
    record_ends: list[bool] = field(default_factory=list)
    kinesis_records: int = 0
    kinesis_bytes: int = 0  # what the answer's records count against the shard's read quota (data + partition keys)
    last_sequence: str | None = None
    dropped_out_of_range: int = 0
    next_iterator: str | None = None
    millis_behind_latest: int | None = None
    at_tip: bool = False
    called_ms: int | None = None  # when the call that got the page started (wall ms), if the transport knows
    # Arrow columns the decode built, by list field, each with that very list (used only while the field holds it).
    # Not an init field: ``dataclasses.replace`` (a cut page) starts without them.
    _arrow: dict[str, tuple[list[Any], pa.Array]] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.data)

    def large_records(self) -> tuple[int, int]:
        """(count, bytes) of the answer's records over 1 MiB (``record_sizes.large_records``); none among KPL
        aggregates' user records (an aggregate is at most 1 MiB). The data column the decode kept tells in C
        when none is (a Python walk of a 10 MiB page of 1 KiB records: ~3 % of its decode)."""
        if len(self.data) != self.kinesis_records or self.kinesis_bytes <= LARGE_RECORD_BYTES:
            return 0, 0
        kept = self._arrow.get("data")
        if kept is not None and kept[0] is self.data and _longest(kept[1]) <= LARGE_RECORD_BYTES:
            return 0, 0
        return large_records(map(len, self.data), self.kinesis_bytes)

    @property
    def caught_up(self) -> bool:
        """An empty answer at the tip: nothing more to read now."""
        return self.kinesis_records == 0 and not self.millis_behind_latest

    def first_arrival_after(self, bound_ms: int, start: int = 0) -> int:
        """Index of the first row (from ``start``) that arrived after ``bound_ms``, else ``len(self)``."""
        bound_us = bound_ms * 1000
        for index in range(start, len(self)):
            arrival = self.arrivals_us[index]
            if arrival is not None and arrival > bound_us:
                return index
        return len(self)

    def first_after(self, sequence_number: str, sub_sequence_number: int, start: int = 0) -> int:
        """Index of the first row (from ``start``) after user record (sequence, sub-sequence), else ``len(self)``."""
        target = (*sequence_key(sequence_number), sub_sequence_number)
        for index in range(start, len(self)):
            if (*sequence_key(self.sequences[index]), self.subs[index]) > target:
                return index
        return len(self)

    def to_batch(self, shard: ShardContext, start: int, stop: int) -> pa.RecordBatch:
        """Rows ``start:stop`` as a RecordBatch in ARROW_SCHEMA."""
        count = stop - start
        columns = [
            self._column("data", start, stop, binary_array),
            constant_column(stream_name(shard.stream_name), pa.string(), count),
            self._column("keys", start, stop, _string_array),
            self._column("sequences", start, stop, _string_array),
            self._column("subs", start, stop, _int64_array),
            constant_column(shard.shard_id, pa.string(), count),
            # the int64 buffer seen as timestamps, cheaper than a cast
            self._column("arrivals_us", start, stop, _int64_array).view(ARRIVAL_TYPE),
        ]
        return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)

    def drop_columns(self) -> None:
        """Forget the Arrow columns kept from the decode (``to_batch`` builds them from the lists again): for a
        page held a while and not made a batch here (the EFO broker's buffer, bounded by the size of the data)."""
        self._arrow.clear()

    def _column(self, name: str, start: int, stop: int, build: Callable[[list[Any]], pa.Array]) -> pa.Array:
        """Rows ``start:stop`` of list field ``name`` as an Arrow array: a zero-copy slice of the column the decode
        built from that very list, unless the field holds another list now (or the same at another length); else
        ``build`` of the rows' list."""
        values = getattr(self, name)
        built = self._arrow.get(name)
        if built is not None and built[0] is values and len(values) == len(built[1]):
            return built[1].slice(start, stop - start)
        return build(values[start:stop])


# The constant columns kept, by (value, type), each the longest asked for so far (a task of 8 shards needs 10).
# Arrow arrays are immutable, so batches can share them.
_CONSTANTS_KEPT = 16
_constant_columns: dict[tuple[str | int, pa.DataType], pa.Array] = {}


def constant_column(value: str | int, type_: pa.DataType, count: int) -> pa.Array:
    """``count`` times ``value`` as a column of ``type_``: a zero-copy slice of the one kept for that value, built
    again only when a longer one is asked for."""
    key = (value, type_)
    column = _constant_columns.get(key)
    if column is None or len(column) < count:
        column = pa.repeat(scalar(value, type_), count)
        if len(_constant_columns) >= _CONSTANTS_KEPT:
            _constant_columns.clear()
        _constant_columns[key] = column
    return column.slice(0, count)


def _longest(column: pa.Array) -> int:
    """The length of a non-empty binary column's longest item, computed by Arrow."""
    return pc.max(pc.binary_length(column)).as_py()


def binary_array(items: list[bytes]) -> pa.Array:
    """``pa.array(items, pa.binary())``, built from ``b"".join(items)`` and the offsets."""
    return _binary_column(items)[0]


@dataclass(frozen=True)
class AnswerSummary:
    """What a GetRecords answer says without its records (``summarize_get_records``): its Kinesis records' count
    and bytes (data + partition keys), the (count, bytes) of those over 1 MiB, the first one's arrival, and where
    the shard goes on from."""

    kinesis_records: int
    kinesis_bytes: int
    large: tuple[int, int]
    first_arrival_us: int | None
    next_iterator: str | None
    millis_behind_latest: int | None


def summarize_get_records(body: bytes | str, shard: ShardContext) -> AnswerSummary:
    """The summary of a GetRecords answer body, without its page's columns: what the driver's probe needs (it
    keeps the body itself for the batch's read). A one-record answer costs ~1 µs here, ~58 µs as a page."""
    answer = _decode(_GET_RECORDS, body, "GetRecords answer", shard)
    records = answer.Records or []
    data_sizes = [len(record.Data) for record in records]
    nbytes = sum(data_sizes) + sum(len(record.PartitionKey.encode()) for record in records)
    return AnswerSummary(
        kinesis_records=len(records),
        kinesis_bytes=nbytes,
        large=large_records(data_sizes, nbytes),
        first_arrival_us=arrival_us(records[0].ApproximateArrivalTimestamp) if records else None,
        next_iterator=answer.NextShardIterator,
        millis_behind_latest=answer.MillisBehindLatest,
    )


def decode_get_records(body: bytes | str, shard: ShardContext) -> Page:
    """Decode a GetRecords answer body (JSON 1.1, base64 data) into a Page of user records."""
    answer = _decode(_GET_RECORDS, body, "GetRecords answer", shard)
    return _records_page(answer.Records or [], answer.NextShardIterator, answer.MillisBehindLatest, shard)


def _decode(decoder: msgspec.json.Decoder[_Answer], body: bytes | str, what: str, shard: ShardContext) -> _Answer:
    """``decoder.decode(body)``, its errors as MalformedAnswerError naming the shard and the answer's kind."""
    try:
        return decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise MalformedAnswerError(f"{what} from {shard.label} is not valid Kinesis JSON: {exc}") from exc


def _records_page(
    records: list[_Record], continuation: str | None, millis_behind: int | None, shard: ShardContext
) -> Page:
    """The Page of an answer's ``Records`` (GetRecords answer or SubscribeToShardEvent: same record shape).

    Plain records (the common case) become the Page's lists in one pass each, and the Arrow columns that
    ``Page.to_batch`` needs of data, partition keys, sequence numbers, sub-sequence numbers and arrival times are
    built here and kept: the data column also answers in C passes whether a record carries the KPL prefix and
    how many bytes the data has, the keys column how many bytes the keys have in UTF-8.
    """
    data = [record.Data for record in records]
    if shard.deaggregate and data and data[0].startswith(MAGIC):  # a KPL producer's page: no plain columns
        return _aggregates_page(records, continuation, millis_behind, shard)
    data_column, data_bytes = _binary_column(data)
    if shard.deaggregate and pc.any(pc.starts_with(data_column, pattern=MAGIC)).as_py():
        return _aggregates_page(records, continuation, millis_behind, shard)
    count = len(records)
    # each string column right after its list, while the strings the list comprehension touched are in cache
    keys = [record.PartitionKey for record in records]
    keys_column = _string_array(keys)
    sequences = [record.SequenceNumber for record in records]
    sequences_column = _string_array(sequences)
    arrivals = arrivals_column([record.ApproximateArrivalTimestamp for record in records])
    page = Page(
        data=data,
        keys=keys,
        sequences=sequences,
        subs=[0] * count,
        arrivals_us=arrivals.to_pylist(),
        record_ends=[True] * count,
        kinesis_records=count,
        kinesis_bytes=data_bytes + value_bytes(keys_column),
        last_sequence=records[-1].SequenceNumber if records else None,
        next_iterator=continuation,
        millis_behind_latest=millis_behind,
    )
    zeros = constant_column(0, pa.int64(), count)
    page._arrow.update(
        data=(data, data_column),
        keys=(keys, keys_column),
        sequences=(sequences, sequences_column),
        subs=(page.subs, zeros),
        arrivals_us=(page.arrivals_us, arrivals),
    )
    return page


def _utf8_bytes(keys: list[str]) -> int:
    """The UTF-8 bytes of the partition keys: with the data, what records count against the shard's read quota."""
    return len("".join(keys).encode())


def _aggregates_page(
    records: list[_Record], continuation: str | None, millis_behind: int | None, shard: ShardContext
) -> Page:
    """The Page of Records among which are KPL aggregates: each record's user records, appended in turn."""
    page = Page(
        kinesis_records=len(records),
        kinesis_bytes=sum(len(record.Data) for record in records)
        + _utf8_bytes([record.PartitionKey for record in records]),
        last_sequence=records[-1].SequenceNumber if records else None,
        next_iterator=continuation,
        millis_behind_latest=millis_behind,
    )
    for record in records:
        _append_record(page, record, shard)
    return page


def _append_record(page: Page, record: _Record, shard: ShardContext) -> None:
    """Append one Kinesis record's user records: itself, or its in-range sub-records when it is an aggregate.

    Sub-records whose hash key is outside the shard's range are dropped, as the KPL format prescribes (after a
    reshard, an aggregate routed by its first record may carry records that belong to another shard, which the
    KPL puts again there); ``page.dropped_out_of_range`` counts them, and the driver logs and reports them.
    A corrupt aggregate raises CorruptAggregateError unless ``pass_through_corrupt``.
    """
    sequence, payload = record.SequenceNumber, record.Data
    data, keys, subs = [payload], [record.PartitionKey], [0]
    if is_aggregated(payload):
        try:
            unpacked = unpack(payload)
        except KplFormatError as exc:
            if not shard.pass_through_corrupt:
                raise CorruptAggregateError(
                    f"corrupt KPL aggregate in {shard.label} at sequence "
                    f"number {sequence}: {exc} (set kinesis.kpl.passThroughCorruptAggregates=true to return it as-is)"
                ) from exc
        else:
            data, keys, subs = _in_range(unpacked, shard)
            page.dropped_out_of_range += len(unpacked.data) - len(data)
    count = len(data)
    page.data += data
    page.keys += keys
    page.subs += subs
    page.sequences += [sequence] * count
    page.arrivals_us += [arrival_us(record.ApproximateArrivalTimestamp)] * count
    page.record_ends += [False] * (count - 1) + [True] if count else []


def _in_range(unpacked: Unpacked, shard: ShardContext) -> tuple[list[bytes], list[str], list[int]]:
    """(data, partition keys, sub-sequence numbers) of an aggregate's user records whose hash key is in the shard's
    range. A shard holding every hash key (a one-shard stream) keeps them all without hashing one; otherwise each
    distinct (partition key, explicit hash key) is hashed once (aggregates repeat keys through their key table)."""
    subs = range(len(unpacked.data))
    if shard.starting_hash_key == 0 and shard.ending_hash_key == MAX_HASH_KEY:
        return unpacked.data, unpacked.partition_keys, list(subs)
    low, high, verdicts = shard.starting_hash_key, shard.ending_hash_key, {}
    kept = []
    for sub, keys in zip(subs, zip(unpacked.partition_keys, unpacked.explicit_hash_keys, strict=True), strict=True):
        verdict = verdicts.get(keys)
        if verdict is None:
            verdict = verdicts[keys] = low <= hash_key_of(*keys) <= high
        if verdict:
            kept.append(sub)
    if len(kept) == len(unpacked.data):
        return unpacked.data, unpacked.partition_keys, kept
    return [unpacked.data[i] for i in kept], [unpacked.partition_keys[i] for i in kept], kept


def decode_subscribe_event(payload: bytes | str, shard: ShardContext) -> Page:
    """Decode a SubscribeToShardEvent's JSON payload (records as in a GetRecords answer) into a Page.

    Who calls it: ``fetch.fanout.subscriber`` for each event of a subscription. The event's
    ``ContinuationSequenceNumber`` (where the next subscription continues; None once the shard has ended) goes into
    ``Page.next_iterator``, so "None means shard end" holds for both transports; every other field is filled as for
    GetRecords.
    """
    event = _decode(_SUBSCRIBE_EVENT, payload, "SubscribeToShardEvent", shard)
    return _records_page(event.Records or [], event.ContinuationSequenceNumber, event.MillisBehindLatest, shard)
