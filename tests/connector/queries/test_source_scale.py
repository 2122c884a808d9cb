"""Planning on streams with many shards: the driver asks at most ``kinesis.maxProbesPerTrigger`` shards per
trigger (those waiting longest first, nothing lost), asks every shard before an AvailableNow query ends, and
lists shards (ListShards, counted by the fault proxy) no more often than ``kinesis.describeShardInterval``
allows, while still finding a split's children."""

from __future__ import annotations

import time

from localaws import LocalServer
from localaws.fault_proxy import FaultProxy
from pyspark_aws_kinesis.shards import list_shards
from pyspark_aws_kinesis.source.offsets import parse_offset
from tests.connector.support.source_util import payloads, read_all, reader, roundtrip, source_options, wait_for


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
