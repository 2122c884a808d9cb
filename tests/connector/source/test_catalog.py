"""``pyspark_aws_kinesis.source.catalog``: listings cached for ``kinesis.describeShardInterval``, listings between full
ones asking only for new shards (and no duplicates when a server lists every shard), and the lineage of reshards:
children wait for every tracked parent, expired shards forgotten, vanished ones reported, a finished shard not read
again."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from localaws import LocalServer
from pyspark_aws_kinesis.aws.clients import kinesis_client
from pyspark_aws_kinesis.positions import LATEST, SHARD_END, TRIM_HORIZON, Position
from pyspark_aws_kinesis.retry import RetryPolicy
from pyspark_aws_kinesis.shards import Shard, list_shards
from pyspark_aws_kinesis.source import catalog as catalog_module
from pyspark_aws_kinesis.source.catalog import ShardCatalog, track_listing
from pyspark_aws_kinesis.source.offsets import KinesisOffset
from pyspark_aws_kinesis.source.settings import SourceSettings
from tests.connector.support.source_util import source_options, wait_for


def _shard(shard_id: str, parent: str | None = None, adjacent: str | None = None, closed: bool = False) -> Shard:
    return Shard(shard_id, parent, adjacent, 0, 10, "1", "9" if closed else None)


def test_lineage_children_wait_for_every_tracked_parent() -> None:
    # s0 split into s2 + s3, then s3 merged with s1 into s4.
    listing = [
        _shard("s0", closed=True),
        _shard("s1", closed=True),
        _shard("s2", "s0"),
        _shard("s3", "s0", closed=True),
        _shard("s4", "s3", "s1"),
    ]
    positions: dict[str, Position] = {}
    parents: dict[str, tuple[str, ...]] = {}
    assert track_listing(positions, parents, "st", listing, lambda _s: Position(TRIM_HORIZON)) == {}
    assert parents == {"st/s2": ("st/s0",), "st/s3": ("st/s0",), "st/s4": ("st/s3", "st/s1")}
    offset = KinesisOffset("src", "/m", 0, positions, parents)
    assert offset.readable() == ["st/s0", "st/s1"]
    positions["st/s0"] = Position(SHARD_END)
    assert KinesisOffset("src", "/m", 0, positions, parents).readable() == ["st/s1", "st/s2", "st/s3"]
    positions["st/s3"] = Position(SHARD_END)
    assert "st/s4" not in KinesisOffset("src", "/m", 0, positions, parents).readable()  # s1 is not finished
    positions["st/s1"] = Position(SHARD_END)
    assert KinesisOffset("src", "/m", 0, positions, parents).readable() == ["st/s2", "st/s4"]


def test_lineage_forgets_expired_shards_and_reports_vanished_ones() -> None:
    positions = {"st/s0": Position(SHARD_END), "st/s1": Position(TRIM_HORIZON), "other/s0": Position(TRIM_HORIZON)}
    parents = {"st/s2": ("st/s0",)}
    positions["st/s2"] = Position(TRIM_HORIZON)
    vanished = track_listing(positions, parents, "st", [_shard("s2", "s0"), _shard("s3")], lambda _s: Position(LATEST))
    assert vanished == {"st/s1": Position(TRIM_HORIZON)}  # unfinished and gone: records may be lost
    # s0 finished and expired: forgotten, and no longer a parent; s3 is new; the other stream is untouched.
    assert positions == {"st/s2": Position(TRIM_HORIZON), "st/s3": Position(LATEST), "other/s0": Position(TRIM_HORIZON)}
    assert parents == {}


def test_a_shard_seen_again_after_it_finished_is_not_read_again() -> None:
    positions = {"st/s0": Position(SHARD_END)}
    parents: dict[str, tuple[str, ...]] = {}
    track_listing(positions, parents, "st", [_shard("s0", closed=True)], lambda _s: Position(TRIM_HORIZON))
    assert positions == {"st/s0": Position(SHARD_END)}


def test_listing_is_cached_for_the_describe_shard_interval(
    kinesalite: LocalServer, lite_stream, tmp_path, monkeypatch
) -> None:
    stream = lite_stream(shards=1)
    calls = []
    settings = SourceSettings.from_options(source_options(kinesalite, stream, tmp_path))

    def counting_client():
        calls.append(1)
        return kinesis_client(settings.client)

    clock = SimpleNamespace(now=1000.0)  # the catalog's: a slow ListShards must not use up the interval
    monkeypatch.setattr(catalog_module, "time", SimpleNamespace(monotonic=lambda: clock.now))
    catalog = ShardCatalog(counting_client, settings.client.retry, min_interval_s=0.3)
    catalog.shards(stream)
    clock.now += 0.29
    catalog.shards(stream)
    assert len(calls) == 1
    clock.now += 0.02
    catalog.shards(stream)
    catalog.shards(stream, fresh=True)
    assert len(calls) == 3


class _RecordingKinesis:
    """A real client whose ListShards arguments are kept."""

    def __init__(self, client: Any):
        self.client = client
        self.list_calls: list[dict[str, Any]] = []

    def list_shards(self, **kwargs: Any) -> dict[str, Any]:
        self.list_calls.append(kwargs)
        return self.client.list_shards(**kwargs)


def test_listings_between_full_ones_ask_only_for_new_shards(kinesalite: LocalServer, lite_stream) -> None:
    stream = lite_stream(shards=2)
    kinesis = _RecordingKinesis(kinesalite.client("kinesis"))
    catalog = ShardCatalog(lambda: kinesis, RetryPolicy(), min_interval_s=0.0, full_interval_s=3600)
    first = catalog.shards(stream)
    assert catalog.shards(stream) == first  # nothing new: the same shards, from one small call
    assert kinesis.list_calls == [
        {"StreamName": stream},
        {"StreamName": stream, "ExclusiveStartShardId": first[-1].shard_id},
    ]

    kinesis.client.split_shard(StreamName=stream, ShardToSplit=first[0].shard_id, NewStartingHashKey=str(2**126))
    wait_for(lambda: len(list_shards(kinesis.client, stream)) == 4, 30, what="the split")
    listed = catalog.shards(stream)
    children = [shard for shard in listed if shard.parent_shard_id == first[0].shard_id]
    assert len(listed) == 4 and len(children) == 2  # the split's children, found by the small call
    assert kinesis.list_calls[-1] == {"StreamName": stream, "ExclusiveStartShardId": first[-1].shard_id}
    assert catalog.shards(stream) == listed  # and the next small call starts after the highest child
    assert kinesis.list_calls[-1] == {"StreamName": stream, "ExclusiveStartShardId": children[-1].shard_id}
    assert catalog.shards(stream, fresh=True) == list_shards(kinesis.client, stream)  # a full listing on demand
    assert kinesis.list_calls[-1] == {"StreamName": stream}


class _Listings:
    """A ListShards server whose stream is ``shards`` (ids, in order), answering ExclusiveStartShardId as AWS does."""

    def __init__(self, shards: list[str]):
        self.shards = shards
        self.calls: list[dict[str, Any]] = []

    def list_shards(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        after = kwargs.get("ExclusiveStartShardId", "")
        return {"Shards": [_api_shard(shard_id) for shard_id in self.shards if shard_id > after]}


def _api_shard(shard_id: str) -> dict[str, Any]:
    return {
        "ShardId": shard_id,
        "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": "10"},
        "SequenceNumberRange": {"StartingSequenceNumber": "1"},
    }


def test_a_re_created_stream_is_listed_after_its_own_highest_shard() -> None:
    server = _Listings(["shardId-000000000007", "shardId-000000000008"])
    catalog = ShardCatalog(lambda: server, RetryPolicy(), min_interval_s=0.0, full_interval_s=3600)
    catalog.shards("s")
    server.shards = ["shardId-000000000000"]  # deleted and created again: its ids start again at 0
    assert [shard.shard_id for shard in catalog.shards("s", fresh=True)] == ["shardId-000000000000"]
    server.shards.append("shardId-000000000001")  # then split or resharded
    assert [shard.shard_id for shard in catalog.shards("s")] == ["shardId-000000000000", "shardId-000000000001"]
    assert server.calls[-1]["ExclusiveStartShardId"] == "shardId-000000000000"


class _ListingEverything(_RecordingKinesis):
    """A server that ignores ExclusiveStartShardId and lists every shard (as moto does)."""

    def list_shards(self, **kwargs: Any) -> dict[str, Any]:
        kwargs.pop("ExclusiveStartShardId", None)
        return super().list_shards(**kwargs)


def test_a_server_listing_every_shard_adds_no_duplicates(kinesalite: LocalServer, lite_stream) -> None:
    stream = lite_stream(shards=2)
    catalog = ShardCatalog(lambda: _ListingEverything(kinesalite.client("kinesis")), RetryPolicy(), 0.0, 3600)
    first = catalog.shards(stream)
    assert catalog.shards(stream) == first
