"""The S3 path store (``pyspark_aws_kinesis.metadata.s3``) on moto: a 409 conditional conflict is retried, not taken
for a lost race, and a streaming run keeps its metadata there."""

from __future__ import annotations

from localaws import LocalServer, aws_client
from localaws.fault_proxy import FaultProxy, Faults
from localaws.streams import put_records, unique_name
from tests.connector.support.metadata_util import _read, _s3_store
from tests.connector.support.source_util import reader, roundtrip, run_batch, source_options


def test_s3_conditional_conflicts_are_retried_not_taken_for_a_lost_race(moto: LocalServer) -> None:
    faults = Faults(s3_conditional_conflict_rate=0.5)
    with FaultProxy(moto.endpoint_url, faults, seed=3) as proxy:
        store = _s3_store(proxy.endpoint_url, moto)
        reads = [_read(f"shardId-{i:012d}", records=i, last=str(i + 1)) for i in range(12)]
        assert [store.put_shard_read("src", 0, read) for read in reads] == reads
        assert proxy.stats["conditional_conflict"] > 0
        assert store.put_shard_read("src", 0, _read(reads[0].shard_id, records=9, last="99")) == reads[0]


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
