"""The quota proxy in front of kinesalite refuses what AWS would, with AWS's errors, and nothing else: GetRecords
per shard (calls and bytes), GetShardIterator, writes entry by entry (the refused ones really not written), the
per-account DescribeStreamSummary; and it counts every call per client, shard and second, also over HTTP.
Time is moved by hand (``ManualClock``), so "within a second" never depends on the machine's speed."""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections import Counter

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from localaws import KINESALITE, LocalAws, LocalServer, aws_client
from localaws.neighbour import NEIGHBOUR_TOKEN, Neighbour
from localaws.quota_model import MiB
from localaws.quota_proxy import QuotaProxy, QuotaServer
from localaws.quota_stats import QuotaReport, assert_refused_at_most
from localaws.streams import (
    create_stream,
    patiently,
    put_records,
    read_stream,
    set_max_record_size,
    wait_for_stream_active,
)

SHARD_0, SHARD_1 = "shardId-000000000000", "shardId-000000000001"
LOW, HIGH = "0", str(2**128 - 1)  # explicit hash keys on the first and the last shard
THROTTLED = "ProvisionedThroughputExceededException"


def client(proxy: QuotaProxy, name: str = "quota-test"):
    """A client through the proxy that never retries, its User-Agent ending with ``name``."""
    config = Config(retries={"total_max_attempts": 1, "mode": "standard"}, read_timeout=60, user_agent_extra=name)
    return aws_client("kinesis", proxy.endpoint_url, config=config)


def iterator(kinesis, stream: str, shard: str) -> str:
    answer = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    return answer["ShardIterator"]


def error_code(call, **kwargs) -> str | None:
    try:
        call(**kwargs)
    except ClientError as error:
        assert error.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        return error.response["Error"]["Code"]
    return None


def test_the_sixth_get_records_in_a_second_is_refused_as_aws_does_and_another_shard_is_not(
    proxy: QuotaProxy, lite_stream
) -> None:
    stream = lite_stream(shards=2)
    kinesis = client(proxy)
    position = iterator(kinesis, stream, SHARD_0)
    for _ in range(5):  # each call reads on from the NextShardIterator of the one before: same shard
        position = kinesis.get_records(ShardIterator=position)["NextShardIterator"]

    refused = urllib.request.Request(
        proxy.endpoint_url,
        data=json.dumps({"ShardIterator": position}).encode(),
        headers={"X-Amz-Target": "Kinesis_20131202.GetRecords", "Content-Type": "application/x-amz-json-1.1"},
    )
    with pytest.raises(urllib.error.HTTPError) as answer:
        urllib.request.urlopen(refused, timeout=10)
    assert answer.value.code == 400 and answer.value.headers["Content-Type"] == "application/x-amz-json-1.1"
    assert json.load(answer.value) == {
        "__type": THROTTLED,
        "message": f"Rate exceeded for Shard - 000000000000/{stream}/{SHARD_0}",
    }

    other = iterator(kinesis, stream, SHARD_1)
    for _ in range(5):
        other = kinesis.get_records(ShardIterator=other)["NextShardIterator"]
    proxy.clock.advance(1.0)  # the refused call took nothing: five more
    for _ in range(5):
        position = kinesis.get_records(ShardIterator=position)["NextShardIterator"]
    assert error_code(kinesis.get_records, ShardIterator=position) == THROTTLED
    counted = proxy.report().by("shard", stream=stream, action="GetRecords")
    assert {shard: (t.calls, t.refused) for shard, t in counted.items()} == {SHARD_0: (12, 2), SHARD_1: (5, 0)}


def _put_mib_records(kinesalite: LocalServer, stream: str, count: int) -> None:
    """``count`` records of exactly 1 MiB as Kinesis counts them (data + 1-byte key), on the first shard."""
    record = {"Data": os.urandom(MiB - 1), "PartitionKey": "k", "ExplicitHashKey": LOW}
    direct = kinesalite.client("kinesis")
    for start in range(0, count, 3):  # kinesalite refuses request bodies over ~7 MB
        direct.put_records(StreamName=stream, Records=[record] * min(3, count - start))


def test_a_10_mib_answer_refuses_every_reader_of_the_shard_for_4_s_after_an_idle_shard(
    proxy: QuotaProxy, kinesalite: LocalServer, lite_stream
) -> None:
    stream = lite_stream(shards=2)
    _put_mib_records(kinesalite, stream, 10)
    reader, neighbour = client(proxy, "reader"), client(proxy, "neighbour")
    assert len(reader.get_records(ShardIterator=iterator(reader, stream, SHARD_0), Limit=10000)["Records"]) == 10
    theirs = iterator(neighbour, stream, SHARD_0)
    proxy.clock.advance(3.99)
    assert error_code(neighbour.get_records, ShardIterator=theirs) == THROTTLED  # the budget is the shard's
    assert error_code(neighbour.get_records, ShardIterator=iterator(neighbour, stream, SHARD_1)) is None
    proxy.clock.advance(0.01)
    assert error_code(neighbour.get_records, ShardIterator=theirs, Limit=1) is None
    report = proxy.report()
    assert report.tally(stream=stream, client="neighbour", shard=SHARD_0, action="GetRecords").refusals == {"bytes": 1}
    assert report.tally(stream=stream, client="reader", action="GetRecords").bytes == 10 * MiB


def test_get_shard_iterator_is_refused_beyond_5_a_second_per_shard(proxy: QuotaProxy, lite_stream) -> None:
    stream = lite_stream(shards=2)
    kinesis = client(proxy)
    for _ in range(5):
        iterator(kinesis, stream, SHARD_0)
    assert error_code(kinesis.get_shard_iterator, StreamName=stream, ShardId=SHARD_0, ShardIteratorType="LATEST") == (
        THROTTLED
    )
    iterator(kinesis, stream, SHARD_1)
    proxy.clock.advance(1.0)
    iterator(kinesis, stream, SHARD_0)


def _entries(prefix: str, count: int, hash_key: str) -> list[dict]:
    return [{"Data": f"{prefix}-{i}".encode(), "PartitionKey": "k", "ExplicitHashKey": hash_key} for i in range(count)]


def test_put_records_refuses_entries_beyond_1000_a_second_and_writes_the_rest_exactly_once(
    proxy: QuotaProxy, kinesalite: LocalServer, lite_stream
) -> None:
    stream = lite_stream(shards=2)
    kinesis = client(proxy)
    first = _entries("a", 500, LOW)
    mixed = [entry for pair in zip(_entries("b", 250, LOW), _entries("c", 250, HIGH), strict=True) for entry in pair]
    last = _entries("d", 500, LOW)
    assert kinesis.put_records(StreamName=stream, Records=first)["FailedRecordCount"] == 0
    assert kinesis.put_records(StreamName=stream, Records=mixed)["FailedRecordCount"] == 0  # 750 on the first shard
    answer = kinesis.put_records(StreamName=stream, Records=last)

    assert answer["FailedRecordCount"] == 250
    refused = [i for i, result in enumerate(answer["Records"]) if "ErrorCode" in result]
    assert refused == list(range(250, 500))
    assert answer["Records"][250] == {
        "ErrorCode": THROTTLED,
        "ErrorMessage": f"Rate exceeded for shard {SHARD_0} in stream {stream} under account 000000000000.",
    }
    stored = Counter(r["Data"] for r in read_stream(kinesalite.client("kinesis"), stream))
    sent = [e["Data"] for e in first + mixed + last]
    assert stored == Counter(sent[:-250])  # the refused entries are not there

    proxy.clock.advance(1.0)
    retry = [last[i] for i in refused]
    assert kinesis.put_records(StreamName=stream, Records=retry)["FailedRecordCount"] == 0
    assert Counter(r["Data"] for r in read_stream(kinesalite.client("kinesis"), stream)) == Counter(sent)
    shard_0 = proxy.report().tally(stream=stream, shard=SHARD_0, action="PutRecords")
    assert (shard_0.calls, shard_0.records, shard_0.refused_records) == (4, 1250, 250)
    assert shard_0.refusals == {"records": 250}


def test_the_write_bytes_quota_and_put_record(proxy: QuotaProxy, lite_stream) -> None:
    stream = lite_stream(shards=2)
    kinesis = client(proxy)
    big = [{"Data": os.urandom(600 * 1024), "PartitionKey": "k", "ExplicitHashKey": LOW}] * 2
    answer = kinesis.put_records(StreamName=stream, Records=big)
    assert answer["FailedRecordCount"] == 1 and answer["Records"][1]["ErrorCode"] == THROTTLED
    assert error_code(kinesis.put_record, StreamName=stream, Data=b"x" * 500_000, PartitionKey="k", ExplicitHashKey=LOW)
    assert kinesis.put_record(StreamName=stream, Data=b"x", PartitionKey="k", ExplicitHashKey=LOW)["ShardId"] == SHARD_0
    assert kinesis.put_record(StreamName=stream, Data=b"y" * 500_000, PartitionKey="k", ExplicitHashKey=HIGH)
    written = proxy.report().by("shard", stream=stream, action=("PutRecords", "PutRecord"))
    assert {shard: (t.records, t.refused_records) for shard, t in written.items()} == {SHARD_0: (2, 2), SHARD_1: (1, 0)}
    assert written[SHARD_0].refusals == {"bytes": 2}


def test_large_records_to_a_raised_stream_and_what_its_maximum_refuses(
    quota_proxy_mock: QuotaProxy, kinesis_mock: LocalServer, mock_stream
) -> None:
    """kinesis-mock (which implements UpdateMaxRecordSize): records over 1 MiB pass on a stream raised to 2 MiB,
    out of the shard's burst reserve; over the maximum, or a call over its size limit, is refused whole."""
    stream, raised = mock_stream(shards=1), mock_stream(shards=1)
    direct = kinesis_mock.client("kinesis")
    set_max_record_size(direct, raised, 2048)
    kinesis = client(quota_proxy_mock)
    assert kinesis.put_record(StreamName=raised, Data=b"x" * (2 * MiB - 1), PartitionKey="k")["ShardId"] == SHARD_0
    too_large = {"Data": b"x" * (2 * MiB), "PartitionKey": "k"}  # one byte over with its key
    assert error_code(kinesis.put_record, StreamName=raised, **too_large) == "ValidationException"
    assert error_code(kinesis.put_records, StreamName=raised, Records=[too_large]) == "ValidationException"
    assert error_code(kinesis.put_record, StreamName=stream, Data=b"x" * MiB, PartitionKey="k") == "ValidationException"
    six_mib = [{"Data": b"x" * (MiB - 1), "PartitionKey": "k"}] * 6
    assert error_code(kinesis.put_records, StreamName=stream, Records=six_mib) == "InvalidArgumentException"
    assert len(read_stream(direct, raised)) == 1 and read_stream(direct, stream) == []
    report = quota_proxy_mock.report()
    refused = [report.tally(stream=name).refusals.get("too_large", 0) for name in (raised, stream)]
    assert refused == [2, 2]


def test_writes_are_charged_to_the_shard_kinesis_puts_them_on_also_after_a_reshard(
    proxy: QuotaProxy, kinesalite: LocalServer, lite_stream
) -> None:
    stream = lite_stream(shards=2)
    keys = [f"key-{i}" for i in range(200)]

    def put(name: str) -> Counter[str]:
        records = [{"Data": b"x", "PartitionKey": key} for key in keys]
        answer = client(proxy, name).put_records(StreamName=stream, Records=records)
        return Counter(result["ShardId"] for result in answer["Records"])

    def charged(name: str) -> Counter[str]:
        rows = proxy.report().by("shard", stream=stream, client=name, action="PutRecords")
        return Counter({shard: tally.records for shard, tally in rows.items()})

    written = put("before")
    assert charged("before") == written and len(written) == 2
    direct = kinesalite.client("kinesis")
    direct.split_shard(StreamName=stream, ShardToSplit=SHARD_0, NewStartingHashKey=str(2**126))
    wait_for_stream_active(direct, stream)
    put("stale")  # the proxy still routes by the old shards: the answer shows it, and it lists them again
    written = put("after")
    assert charged("after") == written and len(written) == 3


def test_describe_stream_summary_is_refused_beyond_20_a_second_per_account(proxy: QuotaProxy, lite_stream) -> None:
    streams = [lite_stream(), lite_stream()]
    kinesis = client(proxy)
    for i in range(20):
        kinesis.describe_stream_summary(StreamName=streams[i % 2])
    code = error_code(kinesis.describe_stream_summary, StreamName=streams[0])
    assert code == "LimitExceededException"
    kinesis.list_shards(StreamName=streams[0])  # another action, its own quota


def test_calls_are_counted_per_client_and_second_and_read_over_http(
    proxy: QuotaProxy, kinesalite: LocalServer, lite_stream
) -> None:
    stream = lite_stream(shards=1)
    ours, theirs = client(proxy, "app/ours-1.0"), client(proxy, "app/theirs-2.0")
    ours.put_records(StreamName=stream, Records=[{"Data": b"abc", "PartitionKey": "key"}] * 3)
    ours.get_records(ShardIterator=iterator(ours, stream, SHARD_0))
    proxy.clock.advance(2.0)
    theirs.get_records(ShardIterator=iterator(theirs, stream, SHARD_0))
    # An iterator from the server itself names no shard the proxy knows: passed through, counted under "?".
    theirs.get_records(ShardIterator=iterator(kinesalite.client("kinesis"), stream, SHARD_0))

    report = QuotaReport.fetch(proxy.endpoint_url, groups={"ours": "app/ours", "theirs": "app/theirs"})
    assert report.clients() == ["ours", "theirs"]
    assert report.tally(client="ours", action="PutRecords").bytes == 3 * (3 + 3)
    assert report.tally(client="ours", action="GetRecords").records == 3
    assert [t.calls for t in report.per_second(stream=stream, client="theirs")] == [0, 0, 2]
    assert report.tally(client="theirs", shard="?").calls == 1
    full = proxy.report().clients()
    assert any("app/ours-1.0" in agent and "Botocore/" in agent for agent in full)  # the whole User-Agent
    assert report.quotas["get_records_calls"] == 5


def test_the_streams_helpers_wait_out_refusals(proxy: QuotaProxy, lite_stream) -> None:
    """``localaws.streams`` (the demo's, the benchmarks' and the tests' helpers) tries a refused call again."""
    stream = lite_stream(shards=1)
    kinesis = client(proxy)
    position = iterator(kinesis, stream, SHARD_0)
    for _ in range(5):
        kinesis.get_records(ShardIterator=position)
    threading.Timer(0.2, proxy.clock.advance, args=(1.0,)).start()  # the next second comes while it waits
    assert patiently(kinesis.get_records, ShardIterator=position, wait_s=0.1)["Records"] == []
    assert proxy.report().tally(stream=stream, action="GetRecords").refused >= 1
    with pytest.raises(ClientError, match="ResourceNotFoundException"):  # anything else at once
        patiently(kinesis.list_shards, StreamName="no-such-stream", give_up_s=60)


def test_local_aws_with_quotas_puts_the_proxy_in_front_of_its_kinesis_server(tmp_path) -> None:
    with LocalAws([KINESALITE], log_dir=tmp_path, quotas=True) as aws:
        front = aws.kinesalite
        assert isinstance(front, QuotaServer) and front.endpoint_url != front.direct.endpoint_url
        assert aws["kinesalite"] is front and aws.servers["kinesalite"] is front.direct
        create_stream(front.direct.client("kinesis"), "s", 1)
        front.client("kinesis").list_shards(StreamName="s")
        assert front.quota_proxy.report().tally(stream="s", action="ListShards").calls == 1
        assert "ListShards" in aws.quota_summary()
        stats_url = front.endpoint_url + "/__quota_stats"
        urllib.request.urlopen(stats_url, timeout=5).close()
    with pytest.raises(OSError):  # stopped with the servers
        urllib.request.urlopen(stats_url, timeout=5)


def test_a_neighbour_reads_everything_and_sees_the_refusals_the_proxy_counts(
    proxy: QuotaProxy, kinesalite: LocalServer, lite_stream
) -> None:
    stream = lite_stream(shards=1)
    put_records(kinesalite.client("kinesis"), stream, [(f"r{i}".encode(), "k") for i in range(3)])
    with Neighbour(proxy.endpoint_url, stream, interval_s=0.01) as neighbour:
        while neighbour.calls < 8:
            time.sleep(0.01)
    assert neighbour.read == [b"r0", b"r1", b"r2"]
    # The clock stands still: the shard's 5 calls of this second are admitted, every later one is refused.
    assert neighbour.refused == neighbour.calls - 5
    report = proxy.report(groups={"neighbour": NEIGHBOUR_TOKEN})
    counted = report.tally(client="neighbour", stream=stream, action="GetRecords")
    assert (counted.calls, counted.refused) == (neighbour.calls, neighbour.refused)
    with pytest.raises(AssertionError, match="'neighbour' had"):
        assert_refused_at_most(report, 0.01, client="neighbour", stream=stream)
