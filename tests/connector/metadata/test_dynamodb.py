"""The DynamoDB metadata store against moto, seen through a recording proxy: batched lookups over 100 keys,
purge by Query (never Scan), a missing table created, throttling retried, the options checked, and
a source whose offsets carry the table so that a new reader (a restart) continues from the same items.

The contract every store shares (first write wins, concurrent writers, purge) is in test_store.py; the options
checked at load() in Spark: tests/connector/queries/test_source_load_validation.py."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from localaws import LocalServer
from localaws.fault_proxy import FaultProxy, Faults
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY
from localaws.streams import put_records, unique_name
from pyspark_aws_kinesis.aws.settings import ClientSettings
from pyspark_aws_kinesis.fetch.reads import ShardRead
from pyspark_aws_kinesis.metadata.dynamodb import DOCUMENT_SOURCE, DynamoDBStore, MetadataTableError
from pyspark_aws_kinesis.positions import TRIM_HORIZON, Position
from pyspark_aws_kinesis.retry import RetryPolicy
from pyspark_aws_kinesis.source.offsets import parse_offset
from tests.connector.support.dynamodb_util import dynamodb_options
from tests.connector.support.source_util import next_batch, payloads, reader, roundtrip, source_options

SETTINGS = ClientSettings(
    "us-east-1", access_key_id=DUMMY_ACCESS_KEY, secret_key=DUMMY_SECRET_KEY, retry=RetryPolicy(8, 1, 20)
)


@pytest.fixture
def proxy(moto: LocalServer) -> Iterator[FaultProxy]:
    """A recording (and, when asked, faulty) proxy in front of moto's DynamoDB."""
    with FaultProxy(moto.endpoint_url) as running:
        yield running


def _store(proxy: FaultProxy, table: str | None = None) -> DynamoDBStore:
    return DynamoDBStore(table or unique_name("meta"), replace(SETTINGS, endpoint_url=proxy.endpoint_url))


def _read(shard: str, records: int = 1) -> ShardRead:
    return ShardRead("orders", shard, Position(TRIM_HORIZON), records, str(records), 0)


def _put_all(store: DynamoDBStore, batch: int, reads: list[ShardRead]) -> None:
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda read: store.put_shard_read("src", batch, read), reads))


def test_batched_lookup_of_more_than_100_shards(proxy: FaultProxy) -> None:
    store = _store(proxy)
    shards = [("orders", f"shardId-{i:012d}") for i in range(250)]
    _put_all(store, 7, [_read(shard, records=int(shard[-3:])) for _stream, shard in shards[::2]])
    proxy.calls.clear()
    found = store.get_shard_reads("src", 7, shards)
    assert proxy.calls == {"BatchGetItem": 3}  # 100 + 100 + 50 keys
    assert found == {
        key: (_read(key[1], int(key[1][-3:])) if index % 2 == 0 else None) for index, key in enumerate(shards)
    }


def test_purge_queries_the_source_and_never_scans(proxy: FaultProxy) -> None:
    store = _store(proxy)
    shards = [f"shardId-{i:012d}" for i in range(30)]  # 2 batches purged: 60 deletes, 25 per BatchWriteItem
    for batch in range(4):
        _put_all(store, batch, [_read(shard) for shard in shards])
    store.put_shard_read("other", 0, _read(shards[0]))
    store.put_document("nonce-1", {"pending": True})
    proxy.calls.clear()
    assert store.purge("src", 2) == 2
    assert set(proxy.calls) == {"Query", "BatchWriteItem"} and proxy.calls["BatchWriteItem"] == 3
    remaining = {batch: store.get_shard_reads("src", batch, [("orders", s) for s in shards]) for batch in range(4)}
    assert [sum(read is not None for read in remaining[batch].values()) for batch in range(4)] == [0, 0, 30, 30]
    assert store.get_shard_read("other", 0, "orders", shards[0]) is not None
    assert store.get_document("nonce-1") == {"pending": True}
    assert store.purge("src", 2) == 0  # nothing left below batch 2


def test_items_have_the_table_keys_and_no_expiry(moto: LocalServer, proxy: FaultProxy) -> None:
    store = _store(proxy)
    store.put_shard_read("src", 3, _read("shardId-000000000001"))
    store.put_document("nonce-2", {"a": 1})
    items = moto.client("dynamodb").scan(TableName=store.table)["Items"]  # the test may scan; the store never does
    keys = sorted((item["sourceId"]["S"], item["batchShard"]["S"]) for item in items)
    assert keys == [(DOCUMENT_SOURCE, "nonce-2"), ("src", "00000000000000000003/orders/shardId-000000000001")]
    assert not [item for item in items if "expiresAt" in item]  # TTL never removes what a stopped query needs


def test_a_missing_table_is_created_on_demand_with_ttl(moto: LocalServer, proxy: FaultProxy) -> None:
    store = _store(proxy)
    assert store.get_shard_read("src", 0, "orders", "shardId-000000000000") is None
    assert {"CreateTable", "UpdateTimeToLive"} <= set(proxy.calls)
    table = moto.client("dynamodb").describe_table(TableName=store.table)["Table"]
    assert table["TableStatus"] == "ACTIVE"
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    assert table["KeySchema"] == [
        {"AttributeName": "sourceId", "KeyType": "HASH"},
        {"AttributeName": "batchShard", "KeyType": "RANGE"},
    ]
    ttl = moto.client("dynamodb").describe_time_to_live(TableName=store.table)["TimeToLiveDescription"]
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expiresAt"}
    proxy.calls.clear()
    store.put_shard_read("src", 0, _read("shardId-000000000000"))
    assert set(proxy.calls) == {"PutItem"}  # created once: no more table calls


def test_a_table_that_cannot_be_created_is_a_clear_error(proxy: FaultProxy) -> None:
    proxy.faults = Faults(server_error_rate=1.0, actions=frozenset({"CreateTable"}))
    store = DynamoDBStore(
        "no-such-table", replace(SETTINGS, endpoint_url=proxy.endpoint_url, retry=RetryPolicy(1, 1, 2))
    )
    with pytest.raises(
        MetadataTableError,
        match=r"'no-such-table' \(option kinesis.dynamodb.tableName\) does not "
        r"exist .* dynamodb:CreateTable",
    ):
        store.put_document("nonce", {})


def test_throttling_is_retried(proxy: FaultProxy) -> None:
    store = _store(proxy)
    store.put_document("warm-up", {})  # the table exists before the faults start
    proxy.faults = Faults(throttle_rate=0.4)
    reads = [_read(f"shardId-{i:012d}") for i in range(20)]
    assert [store.put_shard_read("src", 1, read) for read in reads] == reads
    assert store.get_shard_reads("src", 1, [("orders", read.shard_id) for read in reads]) == {
        ("orders", read.shard_id): read for read in reads
    }
    assert store.purge("src", 2) == 1
    assert proxy.stats["throttled"] > 0


# --- a source on DynamoDB ---------------------------------------------------------------------------------------


def test_a_restarted_reader_continues_from_the_table(
    kinesalite: LocalServer, lite_stream, moto: LocalServer, proxy: FaultProxy
) -> None:
    stream = lite_stream(shards=2)
    produced = [f"r{i:03d}".encode() for i in range(40)]
    put_records(kinesalite.client("kinesis"), stream, [(data, f"k{i}") for i, data in enumerate(produced)])
    table = unique_name("meta")
    options = source_options(kinesalite, stream, "unused", **dynamodb_options(proxy.endpoint_url, table))
    del options["kinesis.metadataPath"]
    options.update({"kinesis.maxFetchRecordsPerShard": "5", "kinesis.minBatchesToRetain": "2"})
    source = reader(options)
    start = roundtrip(source.initialOffset())
    assert parse_offset(start).metadata_path == f"dynamodb://{table}?region=us-east-1"
    rows: list = []
    for _ in range(2):
        start, batch = next_batch(source, start)
        rows += batch
    restarted = reader(options)  # a new driver: only the checkpointed offset connects it to the items
    restarted.commit(start)
    while len(rows) < len(produced):
        start, batch = next_batch(restarted, start)
        rows += batch
    assert sorted(payloads(rows)) == sorted(produced)
    source_id = parse_offset(start).source_id
    items = moto.client("dynamodb").scan(TableName=table)["Items"]
    batches = {item["batchShard"]["S"][:20] for item in items if item["sourceId"]["S"] == source_id}
    assert len(batches) == 2  # kinesis.minBatchesToRetain
