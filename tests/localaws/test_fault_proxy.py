"""The fault-injecting proxy really injects, and never duplicates what it claims failed."""

from __future__ import annotations

import http.client
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, ConnectionClosedError

from localaws import LocalServer, aws_client
from localaws.fault_proxy import FaultProxy, Faults, serving_cpu_s
from localaws.streams import create_stream, put_records, read_stream, unique_name
from tests.localaws.burning_proxy import BURN_S, BurningProxy

NO_RETRIES = Config(retries={"max_attempts": 1, "mode": "standard"}, read_timeout=10)


@pytest.fixture
def proxied(kinesalite: LocalServer):
    kinesis = kinesalite.client("kinesis")
    stream = create_stream(kinesis, unique_name("proxy"), 2)
    with FaultProxy(kinesalite.endpoint_url, seed=1) as proxy:
        yield proxy, aws_client("kinesis", proxy.endpoint_url, config=NO_RETRIES), kinesis, stream


def test_passes_requests_through_untouched(proxied) -> None:
    proxy, via_proxy, direct, stream = proxied
    put_records(via_proxy, stream, [(b"a", "k1"), (b"b", "k2")])
    assert sorted(r["Data"] for r in read_stream(direct, stream)) == [b"a", b"b"]
    assert proxy.stats["forwarded"] >= 1


@pytest.mark.parametrize(
    ("faults", "expected_code"),
    [
        (Faults(throttle_rate=1.0), "ProvisionedThroughputExceededException"),
        (Faults(server_error_rate=1.0), None),
    ],
)
def test_injects_error_answers(proxied, faults: Faults, expected_code: str | None) -> None:
    proxy, via_proxy, _, stream = proxied
    proxy.faults = faults
    with pytest.raises(ClientError) as info:
        via_proxy.put_record(StreamName=stream, Data=b"x", PartitionKey="k")
    if expected_code:
        assert info.value.response["Error"]["Code"] == expected_code
    else:
        assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] in (500, 503)


def test_control_plane_calls_throttle_with_limit_exceeded(proxied) -> None:
    proxy, via_proxy, _, stream = proxied
    proxy.faults = Faults(throttle_rate=1.0)
    with pytest.raises(ClientError, match="LimitExceededException"):
        via_proxy.list_shards(StreamName=stream)


def test_drops_connections(proxied) -> None:
    proxy, via_proxy, _, stream = proxied
    proxy.faults = Faults(drop_rate=1.0)
    with pytest.raises(ConnectionClosedError):
        via_proxy.list_shards(StreamName=stream)
    assert proxy.stats["dropped"] >= 1  # a stale keep-alive connection may be retried once below botocore


def test_a_lost_answer_closes_the_connection_after_the_call_took_effect(proxied) -> None:
    proxy, via_proxy, direct, stream = proxied
    proxy.faults = Faults(lost_answer_rate=1.0, actions=frozenset({"PutRecords"}))
    with pytest.raises(ConnectionClosedError):
        put_records(via_proxy, stream, [(b"a", "k1")])
    stored = [r["Data"] for r in read_stream(direct, stream)]  # once per answer lost (botocore may retry once)
    assert stored == [b"a"] * proxy.stats["answer_lost"] and stored


def test_faults_only_hit_selected_actions(proxied) -> None:
    proxy, via_proxy, _, stream = proxied
    proxy.faults = Faults(throttle_rate=1.0, actions=frozenset({"GetRecords"}))
    via_proxy.put_record(StreamName=stream, Data=b"x", PartitionKey="k")  # not selected: passes
    shard = via_proxy.list_shards(StreamName=stream)["Shards"][0]["ShardId"]
    iterator = via_proxy.get_shard_iterator(StreamName=stream, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    with pytest.raises(ClientError, match="ProvisionedThroughputExceeded"):
        via_proxy.get_records(ShardIterator=iterator["ShardIterator"])


def test_partial_put_failures_are_not_written_so_retries_store_each_record_once(proxied) -> None:
    proxy, via_proxy, direct, stream = proxied
    proxy.faults = Faults(put_records_entry_failure_rate=0.4)
    sent = [(f"r{i}".encode(), f"k{i}") for i in range(600)]
    first = via_proxy.put_records(StreamName=stream, Records=[{"Data": d, "PartitionKey": k} for d, k in sent[:500]])
    assert 0 < first["FailedRecordCount"] < 500
    assert sum("ErrorCode" in r for r in first["Records"]) == first["FailedRecordCount"]
    stored_after_first = Counter(r["Data"] for r in read_stream(direct, stream))
    assert len(stored_after_first) == 500 - first["FailedRecordCount"]

    retried = [sent[i] for i, r in enumerate(first["Records"]) if "ErrorCode" in r] + sent[500:]
    put_records(via_proxy, stream, retried, max_attempts=50)

    stored = Counter(r["Data"] for r in read_stream(direct, stream))
    assert stored == Counter(d for d, _ in sent)
    assert proxy.stats["failed_entries"] >= first["FailedRecordCount"]


def test_trim_refuses_trimmed_positions_moves_the_horizon_and_expires_old_iterators(proxied) -> None:
    proxy, via_proxy, direct, stream = proxied
    sent = put_records(direct, stream, [(f"r{i}".encode(), "k") for i in range(4)])  # one key: one shard
    shard = sent[0]["ShardId"]
    in_shard = [result["SequenceNumber"] for result in sent if result["ShardId"] == shard]
    old = via_proxy.get_shard_iterator(StreamName=stream, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    proxy.trim(stream, shard, in_shard[2])
    with pytest.raises(ClientError, match="StartingSequenceNumber") as refused:
        via_proxy.get_shard_iterator(
            StreamName=stream,
            ShardId=shard,
            ShardIteratorType="AFTER_SEQUENCE_NUMBER",
            StartingSequenceNumber=in_shard[0],
        )
    assert refused.value.response["Error"]["Code"] == "InvalidArgumentException"
    with pytest.raises(ClientError, match="ExpiredIteratorException"):
        via_proxy.get_records(ShardIterator=old["ShardIterator"])
    horizon = via_proxy.get_shard_iterator(StreamName=stream, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    answer = via_proxy.get_records(ShardIterator=horizon["ShardIterator"])
    assert [record["Data"] for record in answer["Records"]] == [b"r2", b"r3"]
    assert via_proxy.get_records(ShardIterator=answer["NextShardIterator"])["Records"] == []  # a fresh iterator
    assert proxy.stats["trimmed_positions"] == 1 and proxy.stats["moved_trim_horizons"] == 1


def test_conditional_puts_of_one_key_go_one_at_a_time_and_one_wins(moto: LocalServer) -> None:
    bucket = unique_name("race").lower()
    aws_client("s3", moto.endpoint_url).create_bucket(Bucket=bucket)
    with FaultProxy(moto.endpoint_url) as proxy:
        s3 = aws_client("s3", proxy.endpoint_url, config=NO_RETRIES)
        held = proxy.conditional_put_lock(f"/{bucket}/key")
        with held:  # another writer's put of the key, under way
            waiting = threading.Thread(target=s3.put_object, kwargs={"Bucket": bucket, "Key": "key", "Body": b"first",
                                                                     "IfNoneMatch": "*"})  # fmt: skip
            waiting.start()
            s3.put_object(Bucket=bucket, Key="other", Body=b"x", IfNoneMatch="*")  # other keys are not held up
            waiting.join(0.5)
            assert waiting.is_alive()  # waits for the key
            assert "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix="key")
        waiting.join(30)
        assert not waiting.is_alive()
        with pytest.raises(ClientError) as lost:
            s3.put_object(Bucket=bucket, Key="key", Body=b"second", IfNoneMatch="*")
        assert lost.value.response["Error"]["Code"] == "PreconditionFailed"
        assert s3.get_object(Bucket=bucket, Key="key")["Body"].read() == b"first"


def test_serving_cpu_counts_the_cpu_its_handlers_spent() -> None:
    with BurningProxy() as proxy:
        before, process_before = serving_cpu_s(), time.process_time()
        assert proxy.get() == b"burnt"
        assert proxy.get() == b"burnt"
        served, process = serving_cpu_s() - before, time.process_time() - process_before
    assert 2 * BURN_S <= served <= process


class _CutUpstream(BaseHTTPRequestHandler):
    """An upstream that answers every request with a chunked stream cut in the middle of its first chunk."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))  # all of it: closing with bytes unread would reset
        self.wfile.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n" + b"x" * 10)
        self.close_connection = True


@pytest.mark.parametrize("faults", [Faults(), Faults(initial_response=True)], ids=["forwarded", "event relay"])
def test_an_upstream_cut_mid_chunk_cuts_the_client_quietly_and_the_proxy_serves_on(faults: Faults, capfd) -> None:
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _CutUpstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    try:
        with FaultProxy(f"http://127.0.0.1:{upstream.server_address[1]}", faults) as proxy:
            port = int(proxy.endpoint_url.rsplit(":", 1)[1])
            for _ in range(2):  # the second request finds the proxy still serving
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                headers = {"X-Amz-Target": "Kinesis_20131202.SubscribeToShard"}
                connection.request("POST", "/", body=b'{"ShardId": "shardId-000000000000"}', headers=headers)
                answer = connection.getresponse()
                assert answer.status == 200
                with pytest.raises(http.client.IncompleteRead):  # cut, as upstream's was: not a clean end
                    answer.read()
                connection.close()
    finally:
        upstream.shutdown()
        upstream.server_close()
    assert "Traceback" not in capfd.readouterr().err
