"""The source's options: how shards are read (GetRecords or enhanced fan-out), where a query starts and a batch
read ends, how much a batch reads, KPL de-aggregation, the driver's probes. ``source.settings`` reads them."""

from __future__ import annotations

import re

from ..positions import parse_starting_position
from .kinds import BOOL, DURATION, STRING, Kind, choice, integer, refuse
from .registry import Option, Side, add


def _position_kind(name: str, allowed: str) -> Kind:
    def parse(raw: str) -> str:
        parse_starting_position(raw)
        return raw.strip()

    return Kind(name, allowed, parse)


STARTING = _position_kind(
    "position",
    "LATEST, TRIM_HORIZON, EARLIEST, AT_TIMESTAMP:<ISO-8601 time with offset>, or a JSON map of per-shard positions",
)
ENDING = Kind("position", "LATEST or a JSON map of per-shard positions", STRING.parse)


CONSUMER_TYPE = add(
    Option(
        "kinesis.consumerType",
        choice("GetRecords", "SubscribeToShard"),
        "GetRecords",
        "How shards are read: `GetRecords` (polling, shared throughput) or `SubscribeToShard` (enhanced fan-out: a "
        "registered consumer with its own 2 MiB/s per shard, pushed; needs `kinesis.consumerName`; streaming queries, "
        "batch reads use GetRecords).",
        Side.SOURCE,
    )
)

# --- enhanced fan-out (kinesis.consumerType=SubscribeToShard; see docs/source.md) ---
CONSUMER_NAME_CHARS = re.compile(r"^[a-zA-Z0-9_.\-]*$")
CONSUMER_NAME_MAX = 128


def _consumer_name_part(raw: str) -> str:
    value = raw.strip()
    if not CONSUMER_NAME_CHARS.match(value) or len(value) > CONSUMER_NAME_MAX:
        raise ValueError
    return value


CONSUMER_NAME_PART = Kind("string", f"at most {CONSUMER_NAME_MAX} letters, digits, _ . -", _consumer_name_part)
CONSUMER_NAME = add(
    Option(
        "kinesis.consumerName",
        Kind("string", CONSUMER_NAME_PART.allowed + " (not empty)", lambda raw: _consumer_name_part(raw) or refuse()),
        None,
        "Name of the enhanced fan-out consumer registered on each stream read (reused when it exists). Required "
        "with `kinesis.consumerType=SubscribeToShard`.",
        Side.SOURCE,
        default_doc="required with SubscribeToShard",
    )
)
CONSUMER_NAME_PREFIX = add(
    Option(
        "kinesis.consumerNamePrefix",
        CONSUMER_NAME_PART,
        "",
        "Prepended to `kinesis.consumerName` to form the registered name (prefix + name: at most 128 characters).",
        Side.SOURCE,
        default_doc="empty",
    )
)
SUBSCRIBE_TIMEOUT_SEC = add(
    Option(
        "kinesis.subscribeToShard.timeoutSec",
        integer(1, 3600),
        60,
        "Longest wait for the next event of a shard subscription (AWS sends one at least every few seconds); "
        "a longer silence counts as a dropped subscription and is retried.",
        Side.SOURCE,
        unit="s",
    )
)
SUBSCRIBE_MAX_RETRIES = add(
    Option(
        "kinesis.subscribeToShard.maxRetries",
        integer(0, 100),
        10,
        "Resubscriptions in a row after a recoverable error before the read fails: a refusal "
        "(ResourceInUseException, LimitExceededException) waits 5 s or 1 s, timeouts, dropped connections and "
        "5xx back off with jitter.",
        Side.SOURCE,
    )
)
REQUIRE_CONSUMER_DEREGISTRATION = add(
    Option(
        "kinesis.requireConsumerDeregistration",
        BOOL,
        False,
        "Deregister the enhanced fan-out consumer when the query ends (best effort). Leftover consumers cost "
        "money: `python -m pyspark_aws_kinesis consumers deregister` cleans up after a crash.",
        Side.SOURCE,
    )
)
STARTING_POSITION = add(
    Option(
        "kinesis.startingPosition",
        STARTING,
        "LATEST",
        "Where a new query starts (a restart always resumes from its checkpoint): `LATEST`, `TRIM_HORIZON`, "
        "`EARLIEST` (= `TRIM_HORIZON`), `AT_TIMESTAMP:<ISO-8601 time with offset>` (the AWS connector's "
        "`AT_TIMESTAMP 2026-11-22T08:00:00Z` works too), or a JSON map of per-shard positions (see docs/source.md).",
        Side.SOURCE,
    )
)
ENDING_POSITION = add(
    Option(
        "kinesis.endingPosition",
        ENDING,
        "LATEST",
        "Batch reads only: where reading stops. `LATEST` = the tip of each shard when the read is planned, or a "
        "JSON map of per-shard inclusive end positions (see docs/source.md).",
        Side.SOURCE,
    )
)
MAX_FETCH_RECORDS_PER_SHARD = add(
    Option(
        "kinesis.maxFetchRecordsPerShard",
        integer(1),
        100000,
        "Most records one micro-batch reads from one shard.",
        Side.SOURCE,
        unit="records",
    )
)
MAX_FETCH_TIME_PER_SHARD_SEC = add(
    Option(
        "kinesis.maxFetchTimePerShardSec",
        integer(1),
        None,
        "Longest time one micro-batch spends reading one shard (a batch that runs again ignores it and stops "
        "exactly where its first run stopped).",
        Side.SOURCE,
        unit="s",
        default_doc="no limit",
    )
)
DESCRIBE_SHARD_INTERVAL = add(
    Option(
        "kinesis.describeShardInterval",
        DURATION,
        1.0,
        "Shortest time between two listings of a stream's shards by the driver.",
        Side.SOURCE,
        unit="duration",
        default_doc="1s",
    )
)
FAIL_ON_DATA_LOSS = add(
    Option(
        "kinesis.failOnDataLoss",
        BOOL,
        False,
        "When records the query should read are gone (its position was trimmed past retention or the stream "
        "re-created, or an unfinished shard vanished): `true` fails the query naming the shard, `false` logs a "
        "warning and continues from the oldest record still there (or the shard's children). A batch that runs "
        "again and cannot find its recorded records always fails.",
        Side.SOURCE,
    )
)
MAX_RECORDS_PER_TRIGGER = add(
    Option(
        "kinesis.maxRecordsPerTrigger",
        integer(1),
        None,
        "Most records one micro-batch reads from all shards together, shared evenly among the shards with "
        "records waiting (pyspark 4.2+ also takes Spark's own ReadMaxRows limit; `Trigger.AvailableNow` then runs "
        "several batches). Each shard still stops at `kinesis.maxFetchRecordsPerShard`.",
        Side.SOURCE,
        unit="records",
        default_doc="no limit",
    )
)
RECORDS_PER_FETCH = add(
    Option(
        "kinesis.getRecords.numberOfRecordsPerFetch",
        integer(1, 10000),
        10000,
        "Most records one GetRecords call asks for (its `Limit`, at most AWS's 10,000). Each call asks for as many "
        "records as fit in the shard's 2 MiB/s for one `kinesis.getRecords.fetchIntervalMs` (at least 0.2 s), by the "
        "record size of the shard's earlier answers, and at most this; while the size is not known yet, 10, or this "
        "value when it is set.",
        Side.SOURCE,
        unit="records",
    )
)
FETCH_INTERVAL_MS = add(
    Option(
        "kinesis.getRecords.fetchIntervalMs",
        integer(0),
        200,
        "Least time between the starts of two GetRecords calls on one shard while a batch reads it (Kinesis "
        "allows 5 calls per second per shard, shared by every application reading it), but at least 250 ms while "
        "more records wait (4 calls a second of 0.5 MiB carry the shard's 2 MiB/s; the fifth is left to other "
        "readers); a call that itself took this long is followed at once. After a refusal "
        "(ProvisionedThroughputExceededException) the read waits longer and asks for fewer records, and comes "
        "back to this pace when refusals stop.",
        Side.SOURCE,
        unit="ms",
    )
)
PROBE_INTERVAL_MS = add(
    Option(
        "kinesis.probeIntervalMs",
        integer(0),
        1000,
        "How often the driver probes an idle shard (one GetRecords: is anything new?), whatever the trigger: "
        "once per interval, at the shard's own turn of it (a stream's shards take evenly spread turns; never two "
        "probes of a shard within half an interval), and at once when a probe finds records on another shard of "
        "a stream that had none (at most once per interval): the first records after a quiet spell are seen "
        "within the interval divided by the stream's shards. A busy shard (its last probe or read found records) "
        "is probed at a trigger when the query made fewer than 4 calls on it in the last second (5 with 200 ms "
        "or less here, which says the query reads the stream alone), the last at least 7/8 of "
        "kinesis.getRecords.fetchIntervalMs ago, and a probe that finds records is the batch's read. A read that "
        "ended at the shard's tip counts as a probe. The default costs an idle shard 1 of its 5 GetRecords per "
        "second, like AWS Lambda's polling; lower values see new records sooner and take that much more of the "
        "budget every reader of the shard shares; below 200 ms a busy shard is asked as often as an idle one "
        '(docs/source.md, "What the source costs a shard").',
        Side.SOURCE,
        unit="ms",
    )
)


SHARDS_PER_PARTITION = add(
    Option(
        "kinesis.shardsPerPartition",
        integer(1, 64),
        8,
        "Shards one Spark input partition (one task) reads, side by side: a shard's read is paced by its quota "
        "(2 MiB/s) and mostly waits, so a task reads its shards at once, and a query whose partitions all run at "
        "once (cores >= shards / this) reads every shard at the quota. 1: a task per shard (with more shards than "
        "cores, Spark runs them in waves: the query reads at cores x 2 MiB/s); more: fewer, busier tasks.",
        Side.SOURCE,
        unit="shards",
    )
)
DEAGGREGATE = add(
    Option(
        "kinesis.kpl.deaggregate",
        BOOL,
        True,
        "Split KPL-aggregated records into their user records (each with its `subSequenceNumber`).",
        Side.SOURCE,
    )
)
PASS_THROUGH_CORRUPT = add(
    Option(
        "kinesis.kpl.passThroughCorruptAggregates",
        BOOL,
        False,
        "A record with the KPL magic but a bad MD5 or protobuf body is returned as-is (subSequenceNumber 0) "
        "instead of failing the query.",
        Side.SOURCE,
    )
)


# --- driver parallelism and names pasted from other connectors' docs -------------------------------------------
CHECK_NEW_RECORD_THREADS = add(
    Option(
        "kinesis.checkNewRecordThreads",
        integer(1, 64),
        8,
        "Threads the driver uses to ask shards whether records are waiting before it plans a batch (the awslabs "
        "connector's option). Above 10 (a client's connection pool), extra connections are opened and dropped.",
        Side.SOURCE,
        unit="threads",
    )
)
MAX_PROBES_PER_TRIGGER = add(
    Option(
        "kinesis.maxProbesPerTrigger",
        integer(1, 1_000_000),
        1000,
        "Most shards the driver asks per trigger whether records are waiting (one GetRecords each), those asked "
        "longest ago first; the others keep their last answer until a later trigger. Bounds planning time on "
        "streams with thousands of shards. With Trigger.AvailableNow the driver asks on until it finds records "
        "or has asked every shard, so the query does not stop early.",
        Side.SOURCE,
        unit="shards",
    )
)
