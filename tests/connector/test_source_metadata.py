"""Metadata stores: first write wins (also under concurrent attempts), the fixed key layout, purge, and the same
contract on a local directory, a pyarrow filesystem, S3 and DynamoDB (moto); the pyarrow store's documented
limit; S3's 409 conflicts retried; a streaming run with its metadata on S3."""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from source_util import reader, roundtrip, run_batch, source_options

from localaws import LocalServer, aws_client
from localaws.fault_proxy import FaultProxy, Faults
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY
from localaws.streams import put_records, unique_name
from pyspark_aws_kinesis.aws.settings import ClientSettings
from pyspark_aws_kinesis.fetch.reads import STOP_CAUGHT_UP, STOP_TIME, DataLossEvent, ShardRead
from pyspark_aws_kinesis.metadata import open_store
from pyspark_aws_kinesis.metadata.dynamodb import DynamoDBStore
from pyspark_aws_kinesis.metadata.filesystem import ArrowFileSystemStore, LocalStore
from pyspark_aws_kinesis.metadata.s3 import S3Store
from pyspark_aws_kinesis.metadata.store import MetadataConflictError, MetadataStore, batch_shard_key
from pyspark_aws_kinesis.positions import AFTER_SEQUENCE_NUMBER, TRIM_HORIZON, WHOLE_RECORD, Position
from pyspark_aws_kinesis.retry import RetryPolicy


def _read(shard: str = "shardId-000000000000", records: int = 0, last: str | None = None) -> ShardRead:
    return ShardRead("stream-a", shard, Position(TRIM_HORIZON), records, last, 0 if last else WHOLE_RECORD)


FAST_RETRY = RetryPolicy(8, 1, 20)
SETTINGS = ClientSettings("us-east-1", access_key_id=DUMMY_ACCESS_KEY, secret_key=DUMMY_SECRET_KEY, retry=FAST_RETRY)


def _s3_store(endpoint_url: str, moto: LocalServer) -> S3Store:
    bucket = unique_name("meta").lower()
    aws_client("s3", moto.endpoint_url).create_bucket(Bucket=bucket)
    return S3Store(f"s3://{bucket}/some/prefix", SETTINGS, endpoint_url)


def _make_store(kind: str, request, tmp_path: Path) -> MetadataStore:
    if kind == "local":
        return LocalStore(str(tmp_path / "meta"))
    if kind == "arrow":
        return ArrowFileSystemStore(str(tmp_path / "meta"), pafs.LocalFileSystem())
    moto: LocalServer = request.getfixturevalue("moto")
    if kind == "s3":
        return _s3_store(moto.endpoint_url, moto)
    # The table does not exist yet: the store creates it on first use.
    return DynamoDBStore(unique_name("meta"), replace(SETTINGS, endpoint_url=moto.endpoint_url))


@pytest.fixture(params=["local", "arrow", "s3", "dynamodb"])
def store(request, tmp_path: Path) -> MetadataStore:
    return _make_store(request.param, request, tmp_path)


def test_first_write_wins(store: MetadataStore) -> None:
    first, other = _read(records=2, last="17"), _read(records=5, last="99")
    assert store.get_shard_read("src", 3, "stream-a", first.shard_id) is None
    assert store.put_shard_read("src", 3, first) == first
    assert store.put_shard_read("src", 3, other) == first
    assert store.get_shard_read("src", 3, "stream-a", first.shard_id) == first
    assert store.put_document("nonce1", {"a": 1}) == {"a": 1}
    assert store.put_document("nonce1", {"a": 2}) == {"a": 1}
    assert store.get_document("nonce1") == {"a": 1} and store.get_document("other") is None


def test_purge_keeps_recent_batches(store: MetadataStore) -> None:
    for batch in range(5):
        store.put_shard_read("src", batch, _read())
        store.put_shard_read("src", batch, _read("shardId-000000000001"))
    store.put_shard_read("another-source", 0, _read())
    assert store.purge("src", 3) == 3
    assert [store.get_shard_read("src", b, "stream-a", "shardId-000000000001") is not None for b in range(5)] == [
        False,
        False,
        False,
        True,
        True,
    ]
    assert store.get_shard_read("another-source", 0, "stream-a", "shardId-000000000000") is not None


def test_batch_documents_leave_with_their_batch(store: MetadataStore) -> None:
    """pyspark 4.0.2's pending-offset resolutions, one per driver start, are purged with the batch they resolve
    to, in every store (without the marker they stayed forever)."""
    for batch in range(6):
        store.put_shard_read("src", batch, _read())
        assert store.put_batch_document("src", batch, f"nonce{batch}", {"batch": batch}) == {"batch": batch}
    store.put_batch_document("another-source", 0, "other0", {"batch": 0})
    assert store.put_batch_document("src", 5, "nonce5", {"batch": 99}) == {"batch": 5}  # first write wins
    assert store.purge("src", 4) == 4
    assert [store.get_document(f"nonce{b}") is not None for b in range(6)] == [False] * 4 + [True] * 2
    assert store.get_document("other0") == {"batch": 0}
    assert store.purge("src", 6) == 2
    assert [store.get_document(f"nonce{b}") for b in range(6)] == [None] * 6
    assert store.get_document("other0") == {"batch": 0}


# The pyarrow store is left out: its limit is the next test.
@pytest.mark.parametrize("kind", ["local", "s3", "dynamodb"])
def test_concurrent_attempts_agree_on_one_winner(kind: str, request, tmp_path: Path) -> None:
    store = _make_store(kind, request, tmp_path)
    candidates = [_read(records=i, last=str(100 + i)) for i in range(16)]
    start = threading.Barrier(8)

    def attempt(read: ShardRead) -> ShardRead:
        with contextlib.suppress(threading.BrokenBarrierError):
            start.wait(5)  # the first eight threads race on the same key at once
        return store.put_shard_read("src", 0, read)

    with ThreadPoolExecutor(8) as pool:
        stored = list(pool.map(attempt, candidates))
    assert len(set(stored)) == 1 and stored[0] in candidates
    assert store.get_shard_read("src", 0, "stream-a", candidates[0].shard_id) == stored[0]


class _InterleavingFileSystem:
    """pyarrow's LocalFileSystem (whose move replaces, like pyarrow's HDFS move), running ``during_move`` once
    just before the first move: a second attempt that writes at that very moment."""

    def __init__(self, during_move):
        self._fs = pafs.LocalFileSystem()
        self._during_move = during_move

    def __getattr__(self, name: str):
        return getattr(self._fs, name)

    def move(self, source: str, target: str) -> None:
        hook, self._during_move = self._during_move, None
        if hook is not None:
            hook()
        self._fs.move(source, target)


def test_pyarrow_store_first_write_wins_only_between_attempts_that_do_not_overlap(tmp_path: Path) -> None:
    """The documented limit (docs/source.md): pyarrow's move replaces an existing file, so two attempts whose
    writes overlap can both be told they won."""
    root = str(tmp_path / "meta")
    first, second = _read(records=1, last="11"), _read(records=2, last="22")
    told: dict[str, ShardRead] = {}

    def second_attempt() -> None:
        told["second"] = ArrowFileSystemStore(root, pafs.LocalFileSystem()).put_shard_read("src", 0, second)

    told["first"] = ArrowFileSystemStore(root, _InterleavingFileSystem(second_attempt)).put_shard_read("src", 0, first)
    assert told == {"first": first, "second": second}  # both believe they won: the limit
    assert (
        ArrowFileSystemStore(root, pafs.LocalFileSystem()).get_shard_read("src", 0, "stream-a", first.shard_id) == first
    )
    # Not overlapping: a later attempt meets the record and is told the winner's end.
    later = ArrowFileSystemStore(root, pafs.LocalFileSystem()).put_shard_read("src", 0, _read(records=3, last="33"))
    assert later == first


def test_s3_conditional_conflicts_are_retried_not_taken_for_a_lost_race(moto: LocalServer) -> None:
    faults = Faults(s3_conditional_conflict_rate=0.5)
    with FaultProxy(moto.endpoint_url, faults, seed=3) as proxy:
        store = _s3_store(proxy.endpoint_url, moto)
        reads = [_read(f"shardId-{i:012d}", records=i, last=str(i + 1)) for i in range(12)]
        assert [store.put_shard_read("src", 0, read) for read in reads] == reads
        assert proxy.stats["conditional_conflict"] > 0
        assert store.put_shard_read("src", 0, _read(reads[0].shard_id, records=9, last="99")) == reads[0]


def test_layout_matches_the_dynamodb_keys(tmp_path: Path) -> None:
    assert batch_shard_key(42, "orders", "shardId-000000000007") == "00000000000000000042/orders/shardId-000000000007"
    LocalStore(str(tmp_path)).put_shard_read("src", 42, _read())
    assert (tmp_path / "src" / "00000000000000000042" / "stream-a" / "shardId-000000000000.json").is_file()


def test_ids_cannot_escape_the_store(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot be used in a metadata key"):
        LocalStore(str(tmp_path)).get_shard_read("../x", 0, "s", "shardId-0")


def test_open_store_picks_the_implementation(tmp_path: Path) -> None:
    assert isinstance(open_store(str(tmp_path)), LocalStore)
    assert isinstance(open_store(f"file://{tmp_path}"), LocalStore)
    assert isinstance(open_store("s3://bucket/prefix"), S3Store)
    dynamo = open_store("dynamodb://meta-table?region=eu-west-1", SETTINGS, dynamodb_endpoint_url="http://127.0.0.1:1")
    assert isinstance(dynamo, DynamoDBStore) and dynamo.table == "meta-table"
    assert "region eu-west-1" in repr(dynamo) and "http://127.0.0.1:1" in repr(dynamo)


def test_shard_read_next_start() -> None:
    assert _read().next_start() == Position(TRIM_HORIZON)
    assert _read(records=1, last="5").next_start() == Position(AFTER_SEQUENCE_NUMBER, "5", WHOLE_RECORD)
    inside = ShardRead("s", "shardId-0", Position(TRIM_HORIZON), 1, "5", 3, last_complete=False)
    assert inside.next_start() == Position(AFTER_SEQUENCE_NUMBER, "5", 3)
    assert ShardRead.from_json(inside.to_json()) == inside


def test_streaming_with_metadata_on_s3(moto: LocalServer, kinesalite: LocalServer, lite_stream) -> None:
    bucket = unique_name("meta").lower()
    aws_client("s3", moto.endpoint_url).create_bucket(Bucket=bucket)
    stream = lite_stream(shards=1)
    produced = [f"r{i}".encode() for i in range(7)]
    put_records(kinesalite.client("kinesis"), stream, [(data, "k") for data in produced])
    options = source_options(
        kinesalite,
        stream,
        f"s3://{bucket}/checkpoints/q1",
        **{"kinesis.metadata.s3EndpointUrl": moto.endpoint_url, "kinesis.maxFetchRecordsPerShard": "4"},
    )
    source = reader(options)
    start = roundtrip(source.initialOffset())
    start, first = run_batch(source, start)
    start, second = run_batch(source, start)
    assert [bytes(r["data"]) for r in first + second] == produced
    keys = [o["Key"] for o in aws_client("s3", moto.endpoint_url).list_objects_v2(Bucket=bucket)["Contents"]]
    assert any(key.endswith(f"00000000000000000000/{stream}/shardId-000000000000.json") for key in keys)


def test_the_conflict_check_compares_positions_not_bookkeeping(tmp_path: Path) -> None:
    """Two attempts that read the same records (a retry, a speculative copy) may see another lag or stop reason."""
    store = LocalStore(str(tmp_path / "meta"))
    first = replace(_read(records=2, last="17"), millis_behind_latest=0, stop=STOP_CAUGHT_UP)
    store.record_shard_read("src", 0, first)
    store.record_shard_read("src", 0, replace(first, millis_behind_latest=5000, stop=STOP_TIME))
    with pytest.raises(MetadataConflictError, match="already recorded by another attempt"):
        store.record_shard_read("src", 0, _read(records=3, last="18"))
    with pytest.raises(MetadataConflictError):  # same count and last record, another start
        store.record_shard_read("src", 0, replace(first, start=Position(AFTER_SEQUENCE_NUMBER, "5")))


def test_old_records_parse_and_new_fields_round_trip() -> None:
    old = {"stream": "s", "shardId": "shardId-1", "start": {"type": "TRIM_HORIZON"}, "records": 0}
    assert ShardRead.from_json(old) == ShardRead("s", "shardId-1", Position(TRIM_HORIZON), 0)
    lossy = replace(_read(), dropped_out_of_range=3, data_loss=DataLossEvent(Position(AFTER_SEQUENCE_NUMBER, "7"), "x"))
    assert ShardRead.from_json(lossy.to_json()) == lossy
    called = replace(_read(), call_starts_ms=(1_000, 1_250, 1_500))
    assert ShardRead.from_json(called.to_json()) == called and called.last_call_ms == 1_500
    recorded_before = {**old, "lastCallMs": 1_500}  # a read recorded when only its last call was kept
    assert ShardRead.from_json(recorded_before).call_starts_ms == (1_500,)
