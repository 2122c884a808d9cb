"""Writers at the write quota on a simulated clock: a stand-in Kinesis client that decides each PutRecords entry with
``localaws.quota_model.QuotaBook`` (the quota proxy's own rules: 1,000 records and 1 MiB in any sliding second per
shard), and counts what it admitted per shard and second. A call takes ``upload_s`` until the stream decides its
entries, then ``answer_s`` until its answer arrives; nothing runs on the wall clock, so counts are exact.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from localaws.quota_model import AWS_QUOTAS, HashRanges, ManualClock, QuotaBook, hash_key
from pyspark_aws_kinesis.retry import RetryPolicy
from pyspark_aws_kinesis.shards import Shard
from pyspark_aws_kinesis.sink.encoded_body import ENCODED_BODY, RAW_ANSWER
from pyspark_aws_kinesis.sink.entries import Entry
from pyspark_aws_kinesis.sink.routing import ShardRouter

TOP = 2**128


def listing(shards: int) -> list[dict]:
    """ListShards' answer for ``shards`` open shards of equal hash ranges."""
    return [
        {
            "ShardId": f"shardId-{i:012d}",
            "HashKeyRange": {
                "StartingHashKey": str(TOP * i // shards),
                "EndingHashKey": str(TOP * (i + 1) // shards - 1),
            },
            "SequenceNumberRange": {"StartingSequenceNumber": "1"},
        }
        for i in range(shards)
    ]


def router(shards: int) -> ShardRouter:
    return ShardRouter(Shard.from_api(shard) for shard in listing(shards))


class _Events:
    def register(self, *args: Any, **kwargs: Any) -> None:
        """put_all's body shortcut needs no botocore here: the stand-in reads the encoded body itself."""


class _Meta:
    events = _Events()


class QuotaKinesis:
    """PutRecords against the quota proxy's rules, on ``clock``; ``admitted[(shard, second)]`` counts records."""

    meta = _Meta()

    def __init__(self, clock: ManualClock, shards: int = 1, upload_s: float = 0.02, answer_s: float = 0.08):
        self.clock, self.book, self.ranges = clock, QuotaBook(AWS_QUOTAS, clock), HashRanges(listing(shards))
        self.upload_s, self.answer_s = upload_s, answer_s
        self.calls = 0
        self.refused = 0
        self.admitted: Counter[tuple[str, int]] = Counter()
        self.last_admitted: dict[str, float] = {}

    def put_records(self, StreamName: str, Records: Any, **kwargs: Any) -> dict:
        self.calls += 1
        self.clock.advance(self.upload_s)
        results = [self._entry(StreamName, record) for record in json.loads(kwargs[ENCODED_BODY])["Records"]]
        self.clock.advance(self.answer_s)
        return {RAW_ANSWER: json.dumps({"Records": results}).encode()}

    def _entry(self, stream: str, record: dict) -> dict:
        shard = self.ranges.shard_of(hash_key(record["PartitionKey"], record.get("ExplicitHashKey")))
        size = len(base64.b64decode(record["Data"])) + len(record["PartitionKey"])
        refusal = self.book.put_entry((stream, str(shard)), size)
        if refusal is not None:
            self.refused += 1
            return {"ErrorCode": refusal.code, "ErrorMessage": refusal.message}
        now = self.clock.now()
        self.admitted[(str(shard), int(now))] += 1
        self.last_admitted[str(shard)] = now
        return {"SequenceNumber": "1", "ShardId": shard}

    def per_second(self, shard: str) -> list[int]:
        """Records admitted to ``shard`` in each whole second from its first to its last."""
        seconds = sorted(second for key, second in self.admitted if key == shard)
        return [self.admitted[(shard, second)] for second in range(seconds[0], seconds[-1] + 1)]


@dataclass(frozen=True)
class ClockRetry(RetryPolicy):
    """A retry policy whose waits move the simulated clock."""

    clock: Any = None

    def sleep(self, seconds: float) -> None:
        self.clock.advance(seconds)


def kib_rows(count: int, keys: int = 1000) -> list[Entry]:
    """``count`` entries of 1,000 bytes of data under ``keys`` partition keys."""
    return [Entry(f"{i:010d}".encode().ljust(1000, b"x"), f"key-{i % keys}") for i in range(count)]
