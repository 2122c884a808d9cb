"""``pyspark_aws_kinesis.source.health.QueryHealth``: the query's lag per shard, what reads found (data lost, KPL
sub-records dropped, vanished shards) and the calls Kinesis refused, as the progress report shows them."""

from __future__ import annotations

import logging

import pytest

from pyspark_aws_kinesis.fetch.iterators import DataLossError
from pyspark_aws_kinesis.fetch.reads import DataLossEvent, ShardRead
from pyspark_aws_kinesis.positions import AFTER_SEQUENCE_NUMBER, TRIM_HORIZON, Position, shard_key
from pyspark_aws_kinesis.source.health import MAX_LOSS_EVENTS, QueryHealth

A, B = shard_key("orders", "shardId-000000000000"), shard_key("orders", "shardId-000000000001")
START = Position(TRIM_HORIZON)


def _read(**fields) -> ShardRead:
    return ShardRead("orders", "shardId-000000000000", START, 3, "3", **fields)


def test_nothing_to_report_before_any_read() -> None:
    health = QueryHealth(fail_on_data_loss=True)
    assert health.lag_report() is None and health.progress_report() is None


def test_the_lag_of_the_last_read_or_probe_of_each_shard_and_the_worst() -> None:
    health = QueryHealth(fail_on_data_loss=True)
    health.read(0, A, _read(millis_behind_latest=500))
    health.probed(B, 2_000)
    health.probed(A, 100)
    health.probed(A, None)  # an answer without a lag keeps the last one
    assert health.lag_report() == {
        "maxMillisBehindLatest": 2_000,
        "maxBehindShard": B,
        "millisBehindLatest": {A: 100, B: 2_000},
    }


def test_reads_findings_are_counted_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    health = QueryHealth(fail_on_data_loss=False)
    gone = DataLossEvent(Position(AFTER_SEQUENCE_NUMBER, "7"), "position gone")
    with caplog.at_level(logging.WARNING, "pyspark_aws_kinesis.source.health"):
        health.read(4, A, _read(dropped_out_of_range=2, refused_calls=3, data_loss=gone))
    report = health.progress_report()
    assert report is not None
    assert (report["recordsDroppedOutOfRange"], report["refusedCalls"]) == (2, 3)
    assert report["refusedCallsPerShard"] == {A: 3}
    assert report["dataLossCount"] == 1
    assert report["dataLossEvents"] == [
        {"batchId": 4, "shard": A, "kind": "position gone", "position": gone.position.to_json()}
    ]
    assert len(caplog.records) == 3 and all("aws-kinesis batch 4" in r.getMessage() for r in caplog.records)


def test_refused_probes_are_counted_per_shard_and_in_total() -> None:
    health = QueryHealth(fail_on_data_loss=True)
    health.probes_refused({A: 1, B: 2})
    health.probes_refused({A: 1})
    assert (health.refused, health.refused_total) == ({A: 2, B: 2}, 4)


def test_only_the_last_loss_events_are_kept_but_every_one_is_counted() -> None:
    health = QueryHealth(fail_on_data_loss=False)
    for batch in range(MAX_LOSS_EVENTS + 5):
        health.lost(batch, A, START, "shard gone")
    assert health.loss_count == MAX_LOSS_EVENTS + 5
    assert [event["batchId"] for event in health.loss_events] == list(range(5, MAX_LOSS_EVENTS + 5))


def test_a_vanished_shard_fails_the_query_when_asked() -> None:
    with pytest.raises(DataLossError, match="no longer exists"):
        QueryHealth(fail_on_data_loss=True).vanished(1, A, START)


def test_a_vanished_shard_is_said_and_counted_once(caplog: pytest.LogCaptureFixture) -> None:
    health = QueryHealth(fail_on_data_loss=False)
    with caplog.at_level(logging.WARNING):
        health.vanished(1, A, START)
        health.vanished(2, A, START)
    assert health.loss_count == 1 and len(caplog.records) == 1


def test_forget_keeps_the_lag_of_unfinished_shards_and_the_refusals_of_tracked_ones() -> None:
    health = QueryHealth(fail_on_data_loss=False)
    health.probed(A, 10)
    health.probed(B, 20)
    health.probes_refused({A: 1, B: 1})
    health.forget(tracked={A, B}, unfinished={B})
    assert health.lag_report() == {"maxMillisBehindLatest": 20, "maxBehindShard": B, "millisBehindLatest": {B: 20}}
    health.forget(tracked={B}, unfinished={B})
    assert (health.refused, health.refused_total) == ({B: 1}, 2)  # the total keeps shards no longer tracked
