"""Planning on streams with many shards: the driver asks at most ``kinesis.maxProbesPerTrigger`` shards per
trigger (those waiting longest first, nothing lost), asks every shard before an AvailableNow query ends, and
lists shards (ListShards, counted by the fault proxy) no more often than ``kinesis.describeShardInterval``
allows, while still finding a split's children; listings between full ones ask only for new shards."""

from __future__ import annotations

import time
from typing import Any

from source_util import payloads, read_all, reader, roundtrip, source_options, wait_for

from localaws import LocalServer
from localaws.fault_proxy import FaultProxy
from pyspark_aws_kinesis.retry import RetryPolicy
from pyspark_aws_kinesis.shards import list_shards
from pyspark_aws_kinesis.source.catalog import ShardCatalog
from pyspark_aws_kinesis.source.offsets import parse_offset


def _one_record_per_shard(server: LocalServer, stream: str) -> list[bytes]:
    kinesis = server.client("kinesis")
    shards = list_shards(kinesis, stream)
    data = [f"{shard.shard_id}".encode() for shard in shards]
    entries = [
        {"Data": item, "PartitionKey": "k", "ExplicitHashKey": str(shard.starting_hash_key)}
        for item, shard in zip(data, shards, strict=True)
    ]
    assert kinesis.put_records(StreamName=stream, Records=entries)["FailedRecordCount"] == 0
    return data


def test_a_trigger_asks_at_most_max_probes_per_trigger_shards(kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    stream = lite_stream(shards=5)
    produced = _one_record_per_shard(kinesalite, stream)
    source = reader(source_options(kinesalite, stream, tmp_path, **{"kinesis.maxProbesPerTrigger": "2"}))
    prober = source.offsets.planner.prober
    start = roundtrip(source.initialOffset())
    rows: list = []
    batch_reads = []
    for _trigger in range(20):
        before = prober.calls
        end = roundtrip(source.latestOffset(start, None))
        assert prober.calls - before <= 2  # never more than the option allows in one trigger
        if end != start:
            batch_reads.append(len(parse_offset(end).active()))
            rows += read_all(source, list(source.partitions(start, end)))
            source.commit(end)
            start = end
        if len(rows) == len(produced):
            break
    assert sorted(payloads(rows)) == sorted(produced)  # every shard was asked in a later trigger: nothing lost
    assert batch_reads[0] == 2 and len(batch_reads) == 3  # 2 + 2 + 1: the shards waiting longest went first


def test_available_now_asks_every_shard_before_it_ends(kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    stream = lite_stream(shards=3)
    kinesis = kinesalite.client("kinesis")
    last = list_shards(kinesis, stream)[-1]  # asked last: shards are asked in key order when all wait as long
    record = {"Data": b"only", "PartitionKey": "k", "ExplicitHashKey": str(last.starting_hash_key)}
    assert kinesis.put_records(StreamName=stream, Records=[record])["FailedRecordCount"] == 0
    source = reader(source_options(kinesalite, stream, tmp_path, **{"kinesis.maxProbesPerTrigger": "1"}))
    start = roundtrip(source.initialOffset())
    source.prepareForTriggerAvailableNow()
    end = roundtrip(source.latestOffset(start, None))
    assert end != start, "AvailableNow would have ended with a record unread"
    assert payloads(read_all(source, list(source.partitions(start, end)))) == [b"only"]


def test_list_shards_respects_the_describe_shard_interval_and_finds_a_split(
    kinesalite: LocalServer, lite_stream, tmp_path
) -> None:
    stream = lite_stream(shards=1)
    interval_s = 1.5
    with FaultProxy(kinesalite.endpoint_url) as proxy:
        options = source_options(kinesalite, stream, tmp_path, **{"kinesis.describeShardInterval": "1500ms"})
        source = reader(options | {"kinesis.endpointUrl": proxy.endpoint_url})
        start = roundtrip(source.initialOffset())
        began = time.monotonic()
        # idle triggers, as Spark's loop runs them, for two intervals and until the listing was refreshed (a
        # stalled process on a loaded machine may take a while to get there)
        while time.monotonic() - began < 2 * interval_s or proxy.calls["ListShards"] < 2:
            assert roundtrip(source.latestOffset(start, None)) == start
            time.sleep(0.02)
            assert time.monotonic() - began < 30, "the listing was never refreshed"
        listings, elapsed = proxy.calls["ListShards"], time.monotonic() - began
        assert listings <= 2 + elapsed / interval_s, (listings, elapsed)  # the initial one, then one per interval

        kinesis = kinesalite.client("kinesis")
        parent = list_shards(kinesis, stream)[0]
        kinesis.split_shard(StreamName=stream, ShardToSplit=parent.shard_id, NewStartingHashKey=str(2**127))
        wait_for(lambda: len(list_shards(kinesis, stream)) == 3, 30, what="the split")
        assert kinesis.put_records(StreamName=stream, Records=[{"Data": b"child", "PartitionKey": "k"}])

        split_at = time.monotonic()
        end = wait_for(
            lambda: (lambda e: e if e != start else None)(roundtrip(source.latestOffset(start, None))),
            30,
            interval_s=0.02,
            what="a batch reading the split's child",
        )
        elapsed = time.monotonic() - split_at
        listings_after = proxy.calls["ListShards"] - listings
        assert payloads(read_all(source, list(source.partitions(start, end)))) == [b"child"]
    planned = parse_offset(end)
    children = [key for key in planned.shards if parent.shard_id not in key]
    assert len(children) == 2 and planned.parents  # found through the listing, tracked under their parent
    assert listings_after <= elapsed / interval_s + 2, (listings_after, elapsed)


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
    assert catalog.shards(stream, fresh=True) == list_shards(kinesis.client, stream)  # a full listing on demand
    assert kinesis.list_calls[-1] == {"StreamName": stream}


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
