"""An in-process Kinesis for benchmarks of the source's driver: a botocore ``before-send`` hook answers every call,
so botocore still builds, signs and parses each one, but no socket and no server's time is measured.

It answers ListShards (pages of 1,000 shards with NextToken, ExclusiveStartShardId), GetShardIterator and
GetRecords in the shapes recorded from kinesalite, and keeps what the long run needs from AWS:
- resharding: ``split`` and ``merge`` close shards (an EndingSequenceNumber) and open children whose sequence
  numbers come after; GetRecords at a closed shard's end answers no NextShardIterator and its ChildShards;
- retention: records older than ``retention_s`` are trimmed, and a closed shard leaves ListShards (and answers
  ResourceNotFoundException) once its last record would have expired;
- iterators expire five minutes after they were issued (ExpiredIteratorException).
Times come from ``time.time()``: a benchmark on a simulated clock (``bench.sim_clock``) moves them too.

Who calls it: ``bench.scale`` (planning at up to 10,000 shards) and ``bench.driver_soak`` (a million triggers).
Not a benchmark itself (run_all skips it).
"""

from __future__ import annotations

import base64
import bisect
import json
import random
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from botocore.awsrequest import AWSResponse

PAGE = 1000  # ListShards' page on AWS
NOWHERE = SimpleNamespace(endpoint_url="http://127.0.0.1:9")  # the clients' endpoint: the hook answers before sending
MAX_HASH_KEY = 2**128 - 1
SEQUENCE_BASE = 49_600_000_000_000_000_000_000_000_000_000_000_000_000_000_000_000_000
ITERATOR_LIFE_S = 300.0  # AWS: a shard iterator expires five minutes after it was returned
RETENTION_S = 24 * 3600.0  # AWS's default retention


class StandInError(Exception):
    """An error answer: botocore turns it into a ClientError with this code."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class _Body:
    def __init__(self, data: bytes):
        self.data = data

    def stream(self, **_: Any):
        yield self.data


@dataclass
class StandInShard:
    """One shard: its hash range, lineage, sequence range and records (sequence, arrival s, base64 data, key)."""

    index: int
    low: int
    high: int
    starting_sequence: int
    parent: str | None = None
    adjacent_parent: str | None = None
    ending_sequence: int | None = None
    closed_at_s: float | None = None
    children: tuple[str, ...] = ()
    records: list[tuple[int, float, str, str]] = field(default_factory=list)  # in sequence order

    @property
    def shard_id(self) -> str:
        return f"shardId-{self.index:012d}"

    @property
    def is_open(self) -> bool:
        return self.ending_sequence is None


@dataclass
class StandInStream:
    shards: dict[int, StandInShard]  # by index; shard ids grow with the index, as on AWS
    next_sequence: int = SEQUENCE_BASE
    retention_s: float = RETENTION_S

    def open_shards(self) -> list[StandInShard]:
        return [shard for shard in self.shards.values() if shard.is_open]

    def take_sequence(self) -> int:
        self.next_sequence += 1
        return self.next_sequence


@dataclass
class StandIn:
    """In-process Kinesis: answers botocore's requests (``before-send``) in kinesalite's shapes."""

    shard_shape: dict[str, Any]  # one ListShards entry as kinesalite answered it
    record_shape: dict[str, Any]  # one GetRecords record as kinesalite answered it
    streams: dict[str, StandInStream] = field(default_factory=dict)
    hooked: set[int] = field(default_factory=set)

    @classmethod
    def recorded(cls, kinesis: Any) -> StandIn:
        """Record the answer shapes from a real server (kinesalite): one shard entry, one record."""
        from localaws.streams import create_stream, unique_name

        stream = create_stream(kinesis, unique_name("bench-shape"), 1)
        kinesis.put_record(StreamName=stream, Data=b"x", PartitionKey="k")
        shards = _raw_answer(kinesis, "list_shards", StreamName=stream)["Shards"]
        iterator = kinesis.get_shard_iterator(
            StreamName=stream, ShardId=shards[0]["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        records = _raw_answer(kinesis, "get_records", ShardIterator=iterator)["Records"]
        kinesis.delete_stream(StreamName=stream)
        shape = {k: v for k, v in shards[0].items() if k not in ("ParentShardId", "AdjacentParentShardId")}
        return cls(shape, records[0])

    # --- the stream's life ------------------------------------------------------------------------------------

    def create(self, stream: str, count: int, retention_s: float = RETENTION_S) -> None:
        shards = {}
        for index in range(count):
            low, high = index * (MAX_HASH_KEY + 1) // count, (index + 1) * (MAX_HASH_KEY + 1) // count - 1
            shards[index] = StandInShard(index, low, high, SEQUENCE_BASE)
        self.streams[stream] = StandInStream(shards, retention_s=retention_s)

    def put(self, stream: str, shard: StandInShard, data: bytes, key: str = "k") -> None:
        record = (self.streams[stream].take_sequence(), time.time(), base64.b64encode(data).decode(), key)
        shard.records.append(record)

    def put_one_per_shard(self, stream: str, tag: str) -> None:
        for shard in self.streams[stream].open_shards():
            self.put(stream, shard, tag.encode())

    def split(self, stream: str, shard: StandInShard) -> tuple[StandInShard, StandInShard]:
        """Close ``shard`` and open two children, each with half its hash range."""
        self._close(stream, shard)
        middle = (shard.low + shard.high) // 2
        first = self._open_child(stream, shard.low, middle, shard.shard_id)
        second = self._open_child(stream, middle + 1, shard.high, shard.shard_id)
        shard.children = (first.shard_id, second.shard_id)
        return first, second

    def merge(self, stream: str, shard: StandInShard, adjacent: StandInShard) -> StandInShard:
        """Close two shards with adjacent hash ranges and open one child over both."""
        assert shard.high + 1 == adjacent.low, "merge needs adjacent hash ranges"
        for parent in (shard, adjacent):
            self._close(stream, parent)
        child = self._open_child(stream, shard.low, adjacent.high, shard.shard_id, adjacent.shard_id)
        shard.children = adjacent.children = (child.shard_id,)
        return child

    def expire(self, stream: str) -> int:
        """Trim records past the retention and forget closed shards whose records all expired; returns how many
        shards left the listing."""
        kept = self.streams[stream]
        oldest = time.time() - kept.retention_s
        for shard in kept.shards.values():
            expired = bisect.bisect_left(shard.records, oldest, key=lambda record: record[1])
            del shard.records[:expired]
        gone = [i for i, s in kept.shards.items() if s.closed_at_s is not None and s.closed_at_s < oldest]
        for index in gone:
            del kept.shards[index]
        return len(gone)

    def _open_child(self, stream: str, low: int, high: int, parent: str, adjacent: str | None = None) -> StandInShard:
        kept = self.streams[stream]
        index = max(kept.shards, default=-1) + 1
        child = StandInShard(index, low, high, kept.next_sequence + 1, parent, adjacent)
        kept.shards[index] = child
        return child

    def _close(self, stream: str, shard: StandInShard) -> None:
        """Before its children open: their sequence numbers come after its end."""
        shard.ending_sequence = self.streams[stream].take_sequence()
        shard.closed_at_s = time.time()

    # --- answering botocore -----------------------------------------------------------------------------------

    def hook(self, client: Any) -> None:
        if id(client) not in self.hooked:
            self.hooked.add(id(client))
            client.meta.events.register("before-send.kinesis", self._answer)

    def _answer(self, request: Any, **_: Any) -> AWSResponse:
        action = request.headers["X-Amz-Target"].decode().rpartition(".")[2]
        headers = {"Content-Type": "application/x-amz-json-1.1"}
        try:
            status, body = 200, getattr(self, f"_{action}")(json.loads(request.body))
        except StandInError as exc:
            status, body = 400, {"__type": exc.code, "message": str(exc)}
        return AWSResponse(request.url, status, headers, _Body(json.dumps(body).encode()))

    def _shard_entry(self, shard: StandInShard) -> dict[str, Any]:
        entry = self.shard_shape | {
            "ShardId": shard.shard_id,
            "HashKeyRange": {"StartingHashKey": str(shard.low), "EndingHashKey": str(shard.high)},
            "SequenceNumberRange": {"StartingSequenceNumber": str(shard.starting_sequence)},
        }
        if shard.ending_sequence is not None:
            entry["SequenceNumberRange"]["EndingSequenceNumber"] = str(shard.ending_sequence)
        if shard.parent:
            entry["ParentShardId"] = shard.parent
        if shard.adjacent_parent:
            entry["AdjacentParentShardId"] = shard.adjacent_parent
        return entry

    def _stream(self, name: str) -> StandInStream:
        if name not in self.streams:
            raise StandInError("ResourceNotFoundException", f"Stream {name} not found")
        return self.streams[name]

    def _ListShards(self, body: dict[str, Any]) -> dict[str, Any]:
        stream, start = body["NextToken"].split("|") if "NextToken" in body else (body["StreamName"], "-1")
        after = body.get("ExclusiveStartShardId")
        first = int(after.rpartition("-")[2]) if after else int(start)
        listed = sorted(i for i in self._stream(stream).shards if i > first)
        page = listed[: body.get("MaxResults", PAGE)]
        answer: dict[str, Any] = {"Shards": [self._shard_entry(self.streams[stream].shards[i]) for i in page]}
        if len(page) < len(listed):
            answer["NextToken"] = f"{stream}|{page[-1]}"
        return answer

    def _shard(self, stream: str, shard_id: str) -> StandInShard:
        shard = self._stream(stream).shards.get(int(shard_id.rpartition("-")[2]))
        if shard is None:
            raise StandInError("ResourceNotFoundException", f"Shard {shard_id} in stream {stream} does not exist")
        return shard

    def _GetShardIterator(self, body: dict[str, Any]) -> dict[str, Any]:
        shard, kind = self._shard(body["StreamName"], body["ShardId"]), body["ShardIteratorType"]
        if kind in ("AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER"):
            at = int(body["StartingSequenceNumber"]) + (kind == "AFTER_SEQUENCE_NUMBER")
        elif kind == "AT_TIMESTAMP":
            stamp = float(body["Timestamp"])
            at = next((r[0] for r in shard.records if r[1] >= stamp), self._tip(body["StreamName"], shard))
        elif kind == "LATEST":
            at = self._tip(body["StreamName"], shard)
        else:  # TRIM_HORIZON
            at = shard.starting_sequence
        return {"ShardIterator": f"{body['StreamName']}|{shard.shard_id}|{at}|{time.time()}"}

    def _tip(self, stream: str, shard: StandInShard) -> int:
        if shard.ending_sequence is not None:
            return shard.ending_sequence + 1
        return self.streams[stream].next_sequence + 1

    def _GetRecords(self, body: dict[str, Any]) -> dict[str, Any]:
        stream, shard_id, at_text, issued = body["ShardIterator"].split("|")
        if time.time() - float(issued) > ITERATOR_LIFE_S:
            raise StandInError("ExpiredIteratorException", "Iterator expired")
        shard, at = self._shard(stream, shard_id), int(at_text)
        limit = body.get("Limit", 10_000)
        first = bisect.bisect_left(shard.records, at, key=lambda record: record[0])
        records = shard.records[first : first + limit]
        answer: dict[str, Any] = {
            "Records": [
                self.record_shape
                | {"SequenceNumber": str(s), "ApproximateArrivalTimestamp": t, "Data": d, "PartitionKey": k}
                for s, t, d, k in records
            ]
        }
        after = records[-1][0] + 1 if records else at
        rest = first + len(records)  # the first record this answer leaves for the next call
        left = rest < len(shard.records)
        answer["MillisBehindLatest"] = int(max(0.0, time.time() - shard.records[rest][1]) * 1000) if left else 0
        if not left and shard.ending_sequence is not None:
            answer["ChildShards"] = [self._child_entry(stream, child) for child in shard.children]
        else:
            answer["NextShardIterator"] = f"{stream}|{shard_id}|{after}|{time.time()}"
        return answer

    def _child_entry(self, stream: str, shard_id: str) -> dict[str, Any]:
        child = self._shard(stream, shard_id)
        parents = [p for p in (child.parent, child.adjacent_parent) if p]
        hash_range = {"StartingHashKey": str(child.low), "EndingHashKey": str(child.high)}
        return {"ShardId": shard_id, "ParentShards": parents, "HashKeyRange": hash_range}


def reshard(standin: StandIn, stream: str, split: bool, rng: random.Random) -> None:
    """Split a random open shard, or merge a random pair of neighbours (open shards tile the hash keys, so any two
    next to each other in hash order can merge)."""
    shards = sorted(standin.streams[stream].open_shards(), key=lambda shard: shard.low)
    if split or len(shards) < 2:
        standin.split(stream, rng.choice(shards))
    else:
        at = rng.randrange(len(shards) - 1)
        standin.merge(stream, shards[at], shards[at + 1])


def _raw_answer(kinesis: Any, method: str, **kwargs: Any) -> dict[str, Any]:
    """A call's answer as the server sent it (JSON, before botocore turns strings into ints and datetimes)."""
    seen: list[bytes] = []

    def keep(response_dict: dict[str, Any], **_: Any) -> None:
        seen.append(response_dict["body"])

    kinesis.meta.events.register("before-parse.kinesis", keep)
    try:
        getattr(kinesis, method)(**kwargs)
    finally:
        kinesis.meta.events.unregister("before-parse.kinesis", keep)
    return json.loads(seen[-1])
