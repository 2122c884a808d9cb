"""A share of large records in the generator's output (``--large-share``, ``--large-size``): streams raised above
1 MiB records are meant for a few large ones beside small ones, and a test of them needs that mix."""

from __future__ import annotations

import math
from dataclasses import dataclass

from kinesis_generator.errors import UsageError
from pyspark_aws_kinesis.sink.entries import DEFAULT_MAX_RECORD_BYTES, MAX_ENTRIES_PER_CALL, RecordLimits, raise_hint


@dataclass(frozen=True)
class LargeRecords:
    """``share`` (0-1) of the records, evenly spread, padded with trailing spaces so that data + partition key is
    ``size`` bytes (a JSON record stays valid JSON); a record already that large is left as it is."""

    share: float
    size: int

    def is_large(self, index: int) -> bool:
        """Whether record number ``index`` (from 0) is one of the share: exactly ``share`` of any prefix, rounded
        down."""
        return math.floor((index + 1) * self.share) > math.floor(index * self.share)

    def record(self, index: int, partition_key: str, data: bytes) -> tuple[str, bytes]:
        if self.is_large(index):
            data = data.ljust(self.size - len(partition_key.encode("utf-8")), b" ")
        return partition_key, data

    def check(self, limits: RecordLimits) -> None:
        """The stream must take records of ``size`` bytes: else one line naming the flag and the stream's maximum."""
        if self.size > limits.max_record_bytes:
            raise UsageError(
                f"--large-size {self.size}: over the stream's maximum record size of {limits.describe()}"
                f"{raise_hint(limits)}",
                "--large-size",
            )

    def largest_call_bytes(self) -> int:
        """The most bytes of records one PutRecords call of the run can carry: 500 records of ``size``, within the
        call limit of a stream that takes them."""
        call_limit = RecordLimits(max(self.size, DEFAULT_MAX_RECORD_BYTES)).max_call_bytes
        return min(MAX_ENTRIES_PER_CALL * self.size, call_limit)
