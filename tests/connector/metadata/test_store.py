"""The metadata store's contract (``pyspark_aws_kinesis.metadata.store``): first write wins (also under concurrent
attempts), the fixed key layout, purge, batch documents leaving with their batch, on a local directory, a pyarrow
filesystem, S3 and DynamoDB (moto); ``open_store`` picks the implementation."""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from localaws import LocalServer
from localaws.fault_proxy import FaultProxy
from localaws.streams import unique_name
from pyspark_aws_kinesis.fetch.reads import STOP_CAUGHT_UP, STOP_TIME, ShardRead
from pyspark_aws_kinesis.metadata import open_store
from pyspark_aws_kinesis.metadata.dynamodb import DynamoDBStore
from pyspark_aws_kinesis.metadata.filesystem import ArrowFileSystemStore, LocalStore
from pyspark_aws_kinesis.metadata.s3 import S3Store
from pyspark_aws_kinesis.metadata.store import MetadataConflictError, MetadataStore, batch_shard_key
from pyspark_aws_kinesis.positions import AFTER_SEQUENCE_NUMBER, Position
from tests.connector.support.metadata_util import SETTINGS, _read, _s3_store


def _make_store(kind: str, request, tmp_path: Path) -> MetadataStore:
    if kind == "local":
        return LocalStore(str(tmp_path / "meta"))
    if kind == "arrow":
        return ArrowFileSystemStore(str(tmp_path / "meta"), pafs.LocalFileSystem())
    moto: LocalServer = request.getfixturevalue("moto")
    if kind == "s3":
        # Through the proxy: it answers a racing conditional put 409 as S3 does (moto alone lets both win).
        proxy = FaultProxy(moto.endpoint_url).start()
        request.addfinalizer(proxy.stop)
        return _s3_store(proxy.endpoint_url, moto)
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


def test_batch_notes_are_first_write_wins_and_leave_with_their_batch(store: MetadataStore) -> None:
    """The sink's notes of partitions written whole (``sink.replay``): a batch of notes alone (no shard read) is
    purged too, and another source's notes of the same batch stay."""
    for batch in range(4):
        assert store.put_batch_note("sink-q", batch, "partition-0", {"batch": batch}) == {"batch": batch}
    assert store.put_batch_note("sink-q", 3, "partition-0", {"batch": 99}) == {"batch": 3}
    assert store.put_batch_note("sink-other", 1, "partition-0", {"other": 1}) == {"other": 1}
    assert store.get_batch_note("sink-q", 3, "partition-1") is None
    assert store.purge("sink-q", 3) == 3
    assert [store.get_batch_note("sink-q", b, "partition-0") for b in range(4)] == [None] * 3 + [{"batch": 3}]
    assert store.get_batch_note("sink-other", 1, "partition-0") == {"other": 1}
    with pytest.raises(ValueError, match="note"):
        store.put_batch_note("sink-q", 1, "../escape", {})


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


def test_layout_matches_the_dynamodb_keys(tmp_path: Path) -> None:
    assert batch_shard_key(42, "orders", "shardId-000000000007") == "00000000000000000042/orders/shardId-000000000007"
    LocalStore(str(tmp_path)).put_shard_read("src", 42, _read())
    assert (tmp_path / "src" / "00000000000000000042" / "stream-a" / "shardId-000000000000.json").is_file()


def test_open_store_picks_the_implementation(tmp_path: Path) -> None:
    assert isinstance(open_store(str(tmp_path)), LocalStore)
    assert isinstance(open_store(f"file://{tmp_path}"), LocalStore)
    assert isinstance(open_store("s3://bucket/prefix"), S3Store)
    dynamo = open_store("dynamodb://meta-table?region=eu-west-1", SETTINGS, dynamodb_endpoint_url="http://127.0.0.1:1")
    assert isinstance(dynamo, DynamoDBStore) and dynamo.table == "meta-table"
    assert "region eu-west-1" in repr(dynamo) and "http://127.0.0.1:1" in repr(dynamo)


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


class _PurgedMeanwhile(LocalStore):
    """Another attempt's record is there when this one creates its own, and purged when this one reads it."""

    def _create(self, relative: str, body: bytes) -> bool:
        return False

    def _read(self, relative: str) -> bytes | None:
        return None


def test_a_record_purged_while_being_written_is_a_conflict(tmp_path: Path) -> None:
    with pytest.raises(MetadataConflictError, match="vanished while being written"):
        _PurgedMeanwhile(str(tmp_path)).put_shard_read("src", 3, _read())
