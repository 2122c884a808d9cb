"""The quotas of a provisioned Kinesis data stream, as the rules ``localaws.quota_proxy`` enforces.

No emulator refuses anything (kinesalite and kinesis-mock answer every call as fast as they can); AWS does, and a
shard's read quota is shared by every application reading it. ``QuotaBook`` decides, call by call, what AWS would
refuse; it holds no sockets and takes its time from a ``Clock``, so tests can move time by hand (``ManualClock``).

The model (docs/localaws.md says the same for users; the limits are AWS's documented ones, ``Quotas``):

- **Call rates** are sliding windows: at most N calls admitted in any window of 1 s (a call admitted at t counts
  until t + 1 s). Refused calls do not count. So the 6th GetRecords within a second on a shard is refused, and a
  reader calling every 200 ms never is. Per shard: GetRecords 5, GetShardIterator 5. Per stream: ListShards
  1,000, DescribeStreamConsumer 20, ListStreamConsumers 5, DeregisterStreamConsumer 5. Per account:
  DescribeStreamSummary 20, DescribeStream 10, RegisterStreamConsumer 5. SubscribeToShard: 1 per consumer and
  shard (refused with LimitExceededException).
- **Read bytes** are paid back: every GetRecords answer's bytes are charged to its shard, which pays them back at
  2 MiB/s; a GetRecords call is refused while more than one second's budget (2 MiB) is still to be paid back. The
  2 MiB/s is an average (AWS: "up to a maximum total data read rate of 2 MiB per second"; five calls in a second
  that return 1 MiB together are not refused for bytes), so small answers close together pass, a 10 MiB answer
  refuses the shard's next calls for 4 s after an idle shard and for up to 5 s after a busy one (AWS: "within the
  next 5 seconds"), nobody reads more than 2 MiB/s for long, and readers share the shard's budget.
- **Write quotas** are sliding windows per shard, entry by entry: at most 1,000 records and 1 MiB admitted in any
  1 s. A PutRecords entry that does not fit is refused on its own (ProvisionedThroughputExceededException in its
  result); the others of the same call still go in.
- **Large records** (over 1 MiB, on a stream whose maximum record size was raised) cannot fit a 1 MiB second: AWS
  lets them through by a burst that refills over time, and publishes neither its size nor its refill. Modeled as a
  reserve per shard of ``put_burst_bytes`` (10 MiB: one record of the largest size into an idle shard) that every
  write drains by its bytes and that refills at the shard's 1 MiB/s: a large record is admitted while the reserve
  holds its bytes, and a shard written at its full 1 MiB/s of small records never refills it.
- **Record size**: a record over its stream's maximum (``MaxRecordSizeInKiB``, 1 MiB unless raised) fails the
  whole call with ValidationException, and a PutRecords call over 5 MiB (10 MiB on a raised stream) with
  InvalidArgumentException, as AWS answers.
- **SubscribeToShard**: besides its 1 call/s, a call within 5 s of a successful one on the same consumer and shard
  is refused with ResourceInUseException; the events of a subscription are paced to 2 MiB/s per consumer and
  shard, paid back like read bytes but delayed instead of refused.
- **RegisterStreamConsumer** is also refused (LimitExceededException) while 5 consumers of the account are CREATING.

A record's bytes are its data plus its partition key, as Kinesis counts a record's size for writes; AWS does not
say more for reads, and the same measure is used there.
"""

from __future__ import annotations

import bisect
import hashlib
import math
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Protocol

MiB = 1024 * 1024
ACCOUNT_ID = "000000000000"  # the account of kinesalite's and kinesis-mock's ARNs
SHARD_THROTTLE = "ProvisionedThroughputExceededException"
LIMIT_EXCEEDED = "LimitExceededException"
RESOURCE_IN_USE = "ResourceInUseException"
VALIDATION, INVALID_ARGUMENT = "ValidationException", "InvalidArgumentException"
# Refusal reasons, as counted by ``localaws.quota_stats``.
CALLS, BYTES, RECORDS, IN_USE, CREATING = "calls", "bytes", "records", "in_use", "creating"
BURST, TOO_LARGE = "burst", "too_large"
STREAM, ACCOUNT = "stream", "account"


class Clock(Protocol):
    """Where the quota proxy takes its time from: ``time.monotonic`` for real, ``ManualClock`` in tests."""

    def now(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class MonotonicClock:
    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class ManualClock:
    """A clock that moves only by ``advance(seconds)``, or when the proxy sleeps (pacing an event stream): a
    quota test then decides what "within the same second" means instead of hoping the machine is fast enough."""

    def __init__(self, start: float = 1000.0):
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds

    def sleep(self, seconds: float) -> None:
        self.advance(max(0.0, seconds))


@dataclass(frozen=True)
class Quotas:
    """The limits enforced, AWS's by default (per second unless named otherwise)."""

    get_records_calls: int = 5  # per shard, shared by every polling reader
    get_records_bytes: int = 2 * MiB  # per shard, paid back
    get_records_debt_s: float = 1.0  # a GetRecords call is refused while more than this much is still to pay back
    get_shard_iterator_calls: int = 5  # per shard
    put_records: int = 1000  # per shard
    put_bytes: int = MiB  # per shard
    put_burst_bytes: int = 10 * MiB  # per shard: the reserve large records are written from (module doc)
    subscribe_calls: int = 1  # per consumer and shard
    subscribe_in_use_s: float = 5.0  # after a successful SubscribeToShard, per consumer and shard
    efo_bytes: int = 2 * MiB  # pushed per consumer and shard
    consumers_creating: int = 5  # per account
    # action -> (scope, calls per second)
    control_plane: tuple[tuple[str, str, int], ...] = (
        ("ListShards", STREAM, 1000),
        ("DescribeStreamConsumer", STREAM, 20),
        ("ListStreamConsumers", STREAM, 5),
        ("DeregisterStreamConsumer", STREAM, 5),
        ("DescribeStreamSummary", ACCOUNT, 20),
        ("DescribeStream", ACCOUNT, 10),
        ("RegisterStreamConsumer", ACCOUNT, 5),
    )

    def control_limit(self, action: str) -> tuple[str, int] | None:
        """(scope, calls per second) of a control-plane action, None if it has no limit here."""
        for name, scope, limit in self.control_plane:
            if name == action:
                return scope, limit
        return None

    def as_dict(self) -> dict:
        fields = {name: getattr(self, name) for name in self.__dataclass_fields__ if name != "control_plane"}
        return {**fields, "control_plane": {name: [scope, limit] for name, scope, limit in self.control_plane}}


AWS_QUOTAS = Quotas()


@dataclass(frozen=True)
class Refusal:
    """What AWS would answer instead: the error code and message, and why (``CALLS``, ``BYTES``, ...)."""

    code: str
    message: str
    reason: str


class SlidingWindow:
    """At most ``limit`` units admitted in any ``span_s`` seconds; a unit admitted at t counts until t + span_s."""

    def __init__(self, limit: float, span_s: float = 1.0):
        self.limit, self.span_s = limit, span_s
        self._log: deque[tuple[float, float]] = deque()
        self._used = 0.0

    def room(self, now: float) -> float:
        while self._log and self._log[0][0] <= now - self.span_s:
            self._used -= self._log.popleft()[1]
        return self.limit - self._used

    def take(self, now: float, amount: float = 1.0) -> None:
        self._log.append((now, amount))
        self._used += amount

    def try_take(self, now: float, amount: float = 1.0) -> bool:
        if self.room(now) < amount:
            return False
        self.take(now, amount)
        return True


class Reserve:
    """Bytes held up to ``capacity``, refilled at ``rate`` per second; full at first."""

    def __init__(self, capacity: float, rate: float):
        self.capacity, self.rate = capacity, rate
        self._level, self._at = capacity, -math.inf

    def level(self, now: float) -> float:
        if self._at > -math.inf:
            self._level = min(self.capacity, self._level + (now - self._at) * self.rate)
        self._at = now
        return self._level

    def drain(self, now: float, amount: float) -> None:
        self._level = max(0.0, self.level(now) - amount)


class PayBack:
    """Bytes charged to a budget that pays them back at ``rate`` per second; clear once all is paid back."""

    def __init__(self, rate: float):
        self.rate = rate
        self.paid_at = -math.inf  # when everything charged so far is paid back

    def wait(self, now: float) -> float:
        return max(0.0, self.paid_at - now)

    def charge(self, now: float, amount: float) -> None:
        self.paid_at = max(self.paid_at, now) + amount / self.rate


ShardKey = tuple[str, str]  # (stream name, shard id)


class QuotaBook:
    """Every quota's state, and the decisions: each method admits (and takes its share) or returns the Refusal."""

    def __init__(self, quotas: Quotas, clock: Clock):
        self.quotas, self.clock = quotas, clock
        self._lock = threading.Lock()
        self._windows: dict[tuple, SlidingWindow] = {}
        self._paybacks: dict[tuple, PayBack] = {}
        self._subscribed_at: dict[tuple[str, str], float] = {}
        self._reserves: dict[ShardKey, Reserve] = {}

    def _window(self, key: tuple, limit: float) -> SlidingWindow:
        found = self._windows.get(key)
        if found is None:
            found = self._windows[key] = SlidingWindow(limit)
        return found

    def _payback(self, key: tuple, rate: float) -> PayBack:
        found = self._paybacks.get(key)
        if found is None:
            found = self._paybacks[key] = PayBack(rate)
        return found

    def get_records(self, shard: ShardKey, now: float | None = None) -> Refusal | None:
        """A GetRecords call on ``shard`` at ``now`` (the clock's now if None): refused beyond 5 calls in a second,
        or while more than a second of its bytes is still to be paid back."""
        now = self.clock.now() if now is None else now
        stream, shard_id = shard
        message = f"Rate exceeded for Shard - {ACCOUNT_ID}/{stream}/{shard_id}"
        with self._lock:
            owed_s = self._payback(("read", shard), self.quotas.get_records_bytes).wait(now)
            if owed_s > self.quotas.get_records_debt_s:
                return Refusal(SHARD_THROTTLE, message, BYTES)
            if not self._window(("GetRecords", shard), self.quotas.get_records_calls).try_take(now):
                return Refusal(SHARD_THROTTLE, message, CALLS)
        return None

    def charge_read(self, shard: ShardKey, nbytes: int) -> None:
        """The bytes of a GetRecords answer on ``shard``, paid back at the shard's read rate."""
        with self._lock:
            self._payback(("read", shard), self.quotas.get_records_bytes).charge(self.clock.now(), nbytes)

    def get_shard_iterator(self, shard: ShardKey) -> Refusal | None:
        with self._lock:
            if self._window(("GetShardIterator", shard), self.quotas.get_shard_iterator_calls).try_take(
                self.clock.now()
            ):
                return None
        return Refusal(SHARD_THROTTLE, _shard_message(shard), CALLS)

    def put_entry(self, shard: ShardKey, nbytes: int) -> Refusal | None:
        """One record written to ``shard`` (PutRecord, or one PutRecords entry); one over a second's bytes comes
        out of the shard's burst reserve (module doc)."""
        now = self.clock.now()
        with self._lock:
            records = self._window(("put-records", shard), self.quotas.put_records)
            size = self._window(("put-bytes", shard), self.quotas.put_bytes)
            reserve = self._reserve(shard)
            if records.room(now) < 1:
                return Refusal(SHARD_THROTTLE, _shard_message(shard), RECORDS)
            large = nbytes > self.quotas.put_bytes
            if (reserve.level(now) if large else size.room(now)) < nbytes:
                return Refusal(SHARD_THROTTLE, _shard_message(shard), BURST if large else BYTES)
            records.take(now)
            size.take(now, min(nbytes, size.room(now)))
            reserve.drain(now, nbytes)
        return None

    def _reserve(self, shard: ShardKey) -> Reserve:
        found = self._reserves.get(shard)
        if found is None:
            found = self._reserves[shard] = Reserve(self.quotas.put_burst_bytes, self.quotas.put_bytes)
        return found

    def subscribe(self, consumer_arn: str, shard_id: str) -> Refusal | None:
        """A SubscribeToShard call: 1 per second per consumer and shard, none within 5 s of a successful one."""
        now, key = self.clock.now(), (consumer_arn, shard_id)
        with self._lock:
            if not self._window(("SubscribeToShard", key), self.quotas.subscribe_calls).try_take(now):
                message = f"Rate exceeded for consumer {consumer_arn} and shard {shard_id}"
                return Refusal(LIMIT_EXCEEDED, message, CALLS)
            if now - self._subscribed_at.get(key, -math.inf) < self.quotas.subscribe_in_use_s:
                stream, consumer = consumer_parts(consumer_arn)
                subscription = f"{ACCOUNT_ID}:{stream}:{shard_id}:{consumer}"
                message = f"Another active subscription exists for this consumer: {subscription}"
                return Refusal(RESOURCE_IN_USE, message, IN_USE)
        return None

    def subscribed(self, consumer_arn: str, shard_id: str) -> None:
        """A SubscribeToShard call succeeded now (the 5 s start from here)."""
        with self._lock:
            self._subscribed_at[(consumer_arn, shard_id)] = self.clock.now()

    def push(self, consumer_arn: str, shard_id: str, nbytes: int) -> None:
        """Send an event of ``nbytes`` record bytes to a subscriber: wait (on the clock) until the consumer and
        shard have paid back what they were pushed before, then charge this event."""
        key = ("push", consumer_arn, shard_id)
        while True:
            with self._lock:
                payback = self._payback(key, self.quotas.efo_bytes)
                wait = payback.wait(self.clock.now())
                if wait <= 0:
                    payback.charge(self.clock.now(), nbytes)
                    return
            self.clock.sleep(wait)

    def control(self, action: str, stream: str) -> Refusal | None:
        """A control-plane call (``Quotas.control_plane``), per stream or per account; others are not limited."""
        found = self.quotas.control_limit(action)
        if found is None:
            return None
        scope, limit = found
        key = (action, stream if scope == STREAM else ACCOUNT)
        with self._lock:
            if self._window(key, limit).try_take(self.clock.now()):
                return None
        where = f"stream {stream} under account {ACCOUNT_ID}" if scope == STREAM else f"account {ACCOUNT_ID}"
        return Refusal(LIMIT_EXCEEDED, f"Rate exceeded for {where}.", CALLS)

    def creating(self, count: int) -> Refusal | None:
        """RegisterStreamConsumer while ``count`` consumers of the account are CREATING."""
        limit = self.quotas.consumers_creating
        if count < limit:
            return None
        message = f"Account {ACCOUNT_ID} already has {count} consumers in CREATING status, the limit is {limit}."
        return Refusal(LIMIT_EXCEEDED, message, CREATING)


def size_refusal(sizes: list[int], max_record_bytes: int, put_record: bool = False) -> Refusal | None:
    """What AWS answers a write call whose records (``sizes``, data + partition key) its stream cannot take: a record
    over the stream's maximum, then a PutRecords call over 5 MiB (10 MiB once the maximum was raised)."""
    for index, size in enumerate(sizes):
        if size > max_record_bytes:
            member = "data" if put_record else f"records.{index + 1}.member.data"
            message = (
                f"1 validation error detected: Value at '{member}' failed to satisfy constraint: Member must have "
                f"length less than or equal to {max_record_bytes}"
            )
            return Refusal(VALIDATION, message, TOO_LARGE)
    call_limit = 5 * MiB if max_record_bytes <= MiB else 10 * MiB
    if sum(sizes) > call_limit:
        return Refusal(INVALID_ARGUMENT, f"Records size exceeds {call_limit // MiB} MB limit", TOO_LARGE)
    return None


def _shard_message(shard: ShardKey) -> str:
    return f"Rate exceeded for shard {shard[1]} in stream {shard[0]} under account {ACCOUNT_ID}."


def consumer_parts(consumer_arn: str) -> tuple[str, str]:
    """(stream name, consumer name) of ``arn:aws:kinesis:<region>:<account>:stream/<s>/consumer/<c>:<created>``."""
    _, _, rest = consumer_arn.partition(":stream/")
    stream, _, consumer = rest.partition("/consumer/")
    return stream, consumer.rpartition(":")[0] or consumer


def stream_of(params: dict) -> str:
    """The stream a Kinesis request names (StreamName, or the name in StreamARN or ConsumerARN), else ""."""
    if params.get("StreamName"):
        return params["StreamName"]
    arn = params.get("StreamARN") or params.get("ConsumerARN") or ""
    return arn.partition(":stream/")[2].partition("/")[0]


def record_bytes(record: dict) -> int:
    """A record's size as Kinesis counts it: its data (base64 in the JSON, decoded length) plus its partition key."""
    data = record.get("Data") or ""
    padding = data[-2:].count("=")
    return len(data) * 3 // 4 - padding + len(record.get("PartitionKey", "").encode())


def hash_key(partition_key: str, explicit_hash_key: str | None = None) -> int:
    """The 128-bit hash key Kinesis routes a record by: ExplicitHashKey if given, else MD5 of the partition key.
    Computed here, not taken from the connector: the referee does not share code with what it judges."""
    if explicit_hash_key:
        return int(explicit_hash_key)
    return int.from_bytes(hashlib.md5(partition_key.encode()).digest(), "big")  # Kinesis's hash, not a security use


class HashRanges:
    """The open shards of a stream by hash-key range: ``shard_of(key)`` is where Kinesis writes a record."""

    def __init__(self, shards: list[dict]):
        open_shards = [s for s in shards if "EndingSequenceNumber" not in s.get("SequenceNumberRange", {})]
        ranges = sorted(
            (int(s["HashKeyRange"]["StartingHashKey"]), int(s["HashKeyRange"]["EndingHashKey"]), s["ShardId"])
            for s in open_shards
        )
        self._starts = [start for start, _, _ in ranges]
        self._ranges = ranges

    def shard_of(self, key: int) -> str | None:
        index = bisect.bisect_right(self._starts, key) - 1
        if index < 0 or key > self._ranges[index][1]:
            return None
        return self._ranges[index][2]
