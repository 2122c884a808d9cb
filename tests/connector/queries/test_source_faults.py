"""The source under injected faults (a loopback FaultProxy in front of kinesalite): throttling, 5xx answers,
dropped connections, latency and expired iterators are retried (throttled reads back off) with nothing lost or
read twice; retries that run out fail with the shard and the last AWS error named."""

from __future__ import annotations

import pytest

from localaws import LocalServer
from localaws.fault_proxy import FaultProxy, Faults
from localaws.streams import put_records
from pyspark_aws_kinesis.retry import RetriesExhaustedError
from tests.connector.support.source_util import drain, payloads, read_all, reader, roundtrip, source_options

READS = frozenset({"ListShards", "GetShardIterator", "GetRecords"})


def _produce(kinesalite: LocalServer, stream: str, count: int) -> list[bytes]:
    data = [f"r-{i:04d}".encode() for i in range(count)]
    put_records(kinesalite.client("kinesis"), stream, [(item, f"k{i}") for i, item in enumerate(data)])
    return data


def test_every_record_once_through_throttling_5xx_drops_and_expired_iterators(
    kinesalite: LocalServer, lite_stream, tmp_path
) -> None:
    stream = lite_stream(shards=3)
    produced = _produce(kinesalite, stream, 300)
    faults = Faults(
        throttle_rate=0.2,
        server_error_rate=0.1,
        drop_rate=0.05,
        expired_iterator_rate=0.1,
        latency_s=0.005,
        actions=READS,
    )
    with FaultProxy(kinesalite.endpoint_url, faults, seed=7) as proxy:
        options = source_options(
            kinesalite,
            stream,
            tmp_path,
            **{
                "kinesis.endpointUrl": proxy.endpoint_url,
                "kinesis.maxFetchRecordsPerShard": "40",
                "kinesis.getRecords.numberOfRecordsPerFetch": "25",
                "kinesis.clientNumRetries": "10",
            },
        )
        source = reader(options)
        _end, batches = drain(source, roundtrip(source.initialOffset()), expect=len(produced))
    rows = [row for batch in batches for row in batch]
    assert sorted(payloads(rows)) == sorted(produced)
    assert len(rows) == len(produced)
    for kind in ("throttled", "server_error", "dropped", "expired_iterator"):
        assert proxy.stats[kind] > 0, f"no {kind} fault was injected: {proxy.stats}"


def test_retries_that_run_out_name_the_shard_and_the_last_error(kinesalite: LocalServer, lite_stream, tmp_path):
    stream = lite_stream(shards=1)
    _produce(kinesalite, stream, 5)
    with FaultProxy(kinesalite.endpoint_url) as proxy:
        options = source_options(
            kinesalite, stream, tmp_path, **{"kinesis.endpointUrl": proxy.endpoint_url, "kinesis.clientNumRetries": "2"}
        )
        source = reader(options)
        start = roundtrip(source.initialOffset())
        end = roundtrip(source.latestOffset(start, None))
        partitions = list(source.partitions(start, end))
        # Server errors: a read refused for the shard's quota backs off instead (test_source_quotas.py).
        proxy.faults = Faults(server_error_rate=1.0, actions=frozenset({"GetRecords"}))
        with pytest.raises(RetriesExhaustedError) as failure:
            read_all(source, partitions)
    message = str(failure.value)
    assert f"GetRecords on stream '{stream}' shard shardId-000000000000 failed after 3 attempts" in message
    assert "last AWS error: InternalFailure" in message or "last AWS error: ServiceUnavailable" in message
    assert proxy.stats["server_error"] == 3
