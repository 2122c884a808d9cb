"""The records a PutRecords call carries and the service's limits on them: ``Entry``, ``RecordLimits`` (a stream's
largest record and call), ``check_entry`` (the limits one record must keep) and ``batches`` (entries grouped into
calls of at most 500 entries and the stream's call size). ``stream_limits`` learns a stream's limits. The sink's
``planning`` makes the entries, ``columns`` checks its rows against the same limits, ``shard_queues`` checks each
entry as ``put_records.put_all`` takes it in, and the load generator (``kinesis_generator.sender``, ``.pool``) makes
and batches its own; nothing here imports pyspark.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

MAX_ENTRIES_PER_CALL = 500
MIB = 1024 * 1024
# A record (data + partition key) is at most the stream's MaxRecordSizeInKiB: 1 MiB unless raised, 10 MiB at most.
DEFAULT_MAX_RECORD_BYTES = MIB
LARGEST_RECORD_BYTES = 10 * MIB
MAX_PARTITION_KEY_CHARS = 256


@dataclass(frozen=True, slots=True)
class RecordLimits:
    """What one stream takes: its largest record, and so its largest PutRecords call (docs/sink.md, "Large
    records"): 5 MiB while records are at most 1 MiB (what every stream has taken since 2014), 10 MiB once the
    stream was raised above it (the API's call limit for large records)."""

    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES

    @property
    def max_call_bytes(self) -> int:
        return 5 * MIB if self.max_record_bytes <= DEFAULT_MAX_RECORD_BYTES else LARGEST_RECORD_BYTES

    def describe(self) -> str:
        return f"{self.max_record_bytes} bytes ({self.max_record_bytes // 1024} KiB)"


DEFAULT_LIMITS = RecordLimits()


@dataclass(frozen=True, slots=True)
class Entry:
    """One record to put. ``explicit_hash_key`` (a decimal 128-bit integer) overrides the key's MD5 routing."""

    data: bytes
    partition_key: str
    explicit_hash_key: str | None = None

    @property
    def size(self) -> int:
        """Bytes this entry counts against the record and call limits (``RecordLimits``)."""
        return len(self.data) + len(self.partition_key.encode("utf-8"))

    def to_request(self) -> dict[str, Any]:
        request: dict[str, Any] = {"Data": self.data, "PartitionKey": self.partition_key}
        if self.explicit_hash_key is not None:
            request["ExplicitHashKey"] = self.explicit_hash_key
        return request


def check_entry(entry: Entry, limits: RecordLimits = DEFAULT_LIMITS) -> int:
    """The entry's size; raises ValueError when the stream would refuse it whatever we do (size, empty key)."""
    if not entry.partition_key:
        raise ValueError("a Kinesis record needs a non-empty partition key")
    if len(entry.partition_key) > MAX_PARTITION_KEY_CHARS:
        raise ValueError(
            f"partition key of {len(entry.partition_key)} characters is longer than "
            f"the {MAX_PARTITION_KEY_CHARS} Kinesis allows"
        )
    size = entry.size
    if size > limits.max_record_bytes:
        raise ValueError(
            f"record of {size} bytes (data + partition key) is over the stream's maximum record size of "
            f"{limits.describe()}{raise_hint(limits)}"
        )
    return size


def raise_hint(limits: RecordLimits) -> str:
    """How to make the stream take larger records, when it can."""
    if limits.max_record_bytes >= LARGEST_RECORD_BYTES:
        return " (the largest Kinesis takes)"
    return (
        "; the stream's owner can raise it up to 10240 KiB (aws kinesis update-max-record-size --stream-arn ARN "
        "--max-record-size-in-ki-b N)"
    )


def batches(entries: Iterable[Entry], limits: RecordLimits = DEFAULT_LIMITS) -> Iterator[list[Entry]]:
    """Group entries, in order, into PutRecords calls of at most 500 entries and ``limits.max_call_bytes``.

    Lazy: each entry is checked (``check_entry``) before the batch holding it is yielded, so an invalid
    entry raises before its batch is sent, but after earlier batches were. Callers that need all-or-nothing
    validation (the sink) check every entry first.
    """
    batch: list[Entry] = []
    batch_bytes = 0
    for entry in entries:
        size = check_entry(entry, limits)
        if len(batch) == MAX_ENTRIES_PER_CALL or batch_bytes + size > limits.max_call_bytes:
            yield batch
            batch, batch_bytes = [], 0
        batch.append(entry)
        batch_bytes += size
    if batch:
        yield batch
