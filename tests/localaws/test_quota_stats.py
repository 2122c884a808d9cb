"""The quota proxy's call log (localaws/quota_stats.py): every GetRecords at the moment the proxy decided on it, and
a client's calls counted in every sliding second, as AWS counts a shard's calls."""

from __future__ import annotations

import pytest

from localaws.quota_proxy import QuotaProxy
from localaws.quota_stats import LoggedCall, QuotaReport, most_in_a_second

from .test_quota_proxy import SHARD_0, SHARD_1, client, iterator


@pytest.mark.parametrize(
    ("times", "most"),
    [
        ([], 0),
        ([5.0], 1),
        ([0.0, 1.0, 2.0, 3.0], 1),  # a second apart: the earlier no longer counts
        ([0.0, 0.999, 1.998], 2),
        ([0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5], 4),  # every 250 ms
        ([0.0, 0.2, 0.4, 0.6, 0.8], 5),
        ([0.0, 0.1, 0.2, 0.3, 0.95, 0.96], 6),
        ([3.0, 0.0, 0.5, 2.9, 2.95], 3),  # in any order
    ],
)
def test_most_in_a_second_counts_as_the_sliding_window_admits(times: list[float], most: int) -> None:
    assert most_in_a_second(times) == most


def test_most_in_a_second_per_shard_for_one_client() -> None:
    calls = [
        LoggedCall(at, agent, "GetRecords", "s", shard, False)
        for at, agent, shard in [
            (0.0, "app/ours", SHARD_0),
            (0.5, "app/ours", SHARD_0),
            (0.7, "app/theirs", SHARD_0),
            (0.9, "app/ours", SHARD_0),
            (0.9, "app/ours", SHARD_1),
            (1.6, "app/ours", SHARD_0),
        ]
    ]
    report = QuotaReport([], 0.0, 2.0, {}, calls)
    assert report.most_in_a_second("ours") == {SHARD_0: 3, SHARD_1: 1}
    assert report.grouped({"mine": "app/ours"}).most_in_a_second("mine") == {SHARD_0: 3, SHARD_1: 1}


def test_the_proxy_logs_each_get_records_when_it_decided_refused_ones_too(proxy: QuotaProxy, lite_stream) -> None:
    stream = lite_stream(shards=1)
    ours, theirs = client(proxy, "app/ours-1.0"), client(proxy, "app/theirs-2.0")
    position = iterator(ours, stream, SHARD_0)
    for _ in range(5):
        position = ours.get_records(ShardIterator=position)["NextShardIterator"]
        proxy.clock.advance(0.125)  # steps a float holds exactly
    with pytest.raises(theirs.exceptions.ProvisionedThroughputExceededException):
        theirs.get_records(ShardIterator=iterator(theirs, stream, SHARD_0))
    proxy.clock.advance(0.5)  # the first two calls of ours have left the second: room again
    theirs.get_records(ShardIterator=iterator(theirs, stream, SHARD_0))

    report = QuotaReport.fetch(proxy.endpoint_url, groups={"ours": "app/ours", "theirs": "app/theirs"}, calls=True)
    logged = [(call.client, round(call.at_s - report.calls[0].at_s, 3), call.refused) for call in report.calls]
    assert logged == [
        *[("ours", 0.125 * i, False) for i in range(5)],
        ("theirs", 0.625, True),
        ("theirs", 1.125, False),
    ]
    assert report.most_in_a_second("ours") == {SHARD_0: 5}
    assert report.most_in_a_second("theirs") == {SHARD_0: 2}
    assert QuotaReport.fetch(proxy.endpoint_url).calls == []  # the log only when asked for


def test_the_log_keeps_each_answers_bytes(proxy: QuotaProxy, lite_stream) -> None:
    """A GetRecords answer's bytes (data and partition key) are logged with its call, a refused call's as 0."""
    stream = lite_stream(shards=1)
    ours = client(proxy, "app/ours-1.0")
    ours.put_records(StreamName=stream, Records=[{"Data": b"x" * 100, "PartitionKey": f"k{i}"} for i in range(3)])
    ours.get_records(ShardIterator=iterator(ours, stream, SHARD_0))
    (call,) = [call for call in QuotaReport.fetch(proxy.endpoint_url, calls=True).calls if call.stream == stream]
    assert (call.nbytes, call.refused) == (3 * 102, False)
