"""The records a PutRecords call carries and the service's limits on them: ``Entry``, ``check_entry`` (the limits
one record must keep) and ``batches`` (entries grouped into calls of at most 500 entries and 5 MiB). The sink's
``planning`` makes the entries, ``columns`` checks its rows against the same limits, ``shard_queues`` checks each
entry as ``put_records.put_all`` takes it in, and the load generator (``kinesis_generator.sender``, ``.pool``) makes
and batches its own; nothing here imports pyspark.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

MAX_ENTRIES_PER_CALL = 500
MAX_BYTES_PER_CALL = 5 * 1024 * 1024
MAX_ENTRY_BYTES = 1024 * 1024  # data + partition key of one record
MAX_PARTITION_KEY_CHARS = 256


@dataclass(frozen=True, slots=True)
class Entry:
    """One record to put. ``explicit_hash_key`` (a decimal 128-bit integer) overrides the key's MD5 routing."""

    data: bytes
    partition_key: str
    explicit_hash_key: str | None = None

    @property
    def size(self) -> int:
        """Bytes this entry counts against the 1 MiB record and 5 MiB call limits."""
        return len(self.data) + len(self.partition_key.encode("utf-8"))

    def to_request(self) -> dict[str, Any]:
        request: dict[str, Any] = {"Data": self.data, "PartitionKey": self.partition_key}
        if self.explicit_hash_key is not None:
            request["ExplicitHashKey"] = self.explicit_hash_key
        return request


def check_entry(entry: Entry) -> int:
    """The entry's size; raises ValueError when the service would refuse it whatever we do (size, empty key)."""
    if not entry.partition_key:
        raise ValueError("a Kinesis record needs a non-empty partition key")
    if len(entry.partition_key) > MAX_PARTITION_KEY_CHARS:
        raise ValueError(
            f"partition key of {len(entry.partition_key)} characters is longer than "
            f"the {MAX_PARTITION_KEY_CHARS} Kinesis allows"
        )
    size = entry.size
    if size > MAX_ENTRY_BYTES:
        raise ValueError(
            f"record of {size} bytes (data + partition key) is over the Kinesis limit of "
            f"{MAX_ENTRY_BYTES} bytes (1 MiB)"
        )
    return size


def batches(entries: Iterable[Entry]) -> Iterator[list[Entry]]:
    """Group entries, in order, into PutRecords calls of at most 500 entries and 5 MiB.

    Lazy: each entry is checked (``check_entry``) before the batch holding it is yielded, so an invalid
    entry raises before its batch is sent, but after earlier batches were. Callers that need all-or-nothing
    validation (the sink) check every entry first.
    """
    batch: list[Entry] = []
    batch_bytes = 0
    for entry in entries:
        size = check_entry(entry)
        if len(batch) == MAX_ENTRIES_PER_CALL or batch_bytes + size > MAX_BYTES_PER_CALL:
            yield batch
            batch, batch_bytes = [], 0
        batch.append(entry)
        batch_bytes += size
    if batch:
        yield batch
