"""``pyspark_aws_kinesis.sink.put_records.put_all``: failed entries retried until stored, clear errors otherwise, and
two writers filling one shard behind the quota proxy take turns and store everything."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.config import Config

from localaws import LocalServer, aws_client
from localaws.fault_proxy import FaultProxy, Faults
from localaws.quota_proxy import QuotaProxy
from localaws.streams import iterate_shard, list_shard_ids, read_stream
from pyspark_aws_kinesis.retry import RetryPolicy
from pyspark_aws_kinesis.sink.entries import MAX_ENTRIES_PER_CALL, Entry
from pyspark_aws_kinesis.sink.put_records import PutRecordsFailedError, PutStats, put_all
from tests.connector.sink.shard_map_util import _entries
from tests.connector.support.sink_util import _rows, _stored_rows

FAST_RETRY = RetryPolicy(max_retries=3, initial_interval_ms=1, max_interval_ms=5)
# total_max_attempts counts the first try; botocore's max_attempts would still allow one retry.
NO_BOTOCORE_RETRIES = Config(retries={"total_max_attempts": 1, "mode": "standard"}, read_timeout=10)


def _stored(kinesis, stream: str) -> list[bytes]:
    return [record["Data"] for record in read_stream(kinesis, stream)]


@pytest.fixture
def proxy(kinesalite: LocalServer):
    with FaultProxy(kinesalite.endpoint_url, seed=7) as running:
        yield running


@pytest.fixture
def via_proxy(proxy: FaultProxy):
    return aws_client("kinesis", proxy.endpoint_url, config=NO_BOTOCORE_RETRIES)


def test_stats_add_up() -> None:
    total = PutStats(records=2, bytes=10, calls=1)
    total += PutStats(records=3, bytes=5, calls=2, retried_entries=4)
    assert total == PutStats(records=5, bytes=15, calls=3, retried_entries=4)
    assert (total + PutStats(failed_entries=1)).failed_entries == 1


# --- against kinesalite -----------------------------------------------------------------------------------


def test_put_all_stores_everything_in_key_order(kinesalite: LocalServer, lite_stream) -> None:
    stream = lite_stream(shards=2)
    kinesis = kinesalite.client("kinesis")
    entries = _entries(1234)
    stats = put_all(kinesis, stream, entries, FAST_RETRY)
    assert (stats.records, stats.calls, stats.retried_entries) == (1234, 3, 0)
    assert stats.bytes == sum(entry.size for entry in entries)
    stored = read_stream(kinesis, stream)
    assert sorted(r["Data"] for r in stored) == sorted(e.data for e in entries)
    for key in {e.partition_key for e in entries}:
        assert [r["Data"] for r in stored if r["PartitionKey"] == key] == [
            e.data for e in entries if e.partition_key == key
        ]


def test_explicit_hash_key_picks_the_shard(kinesalite: LocalServer, lite_stream) -> None:
    stream = lite_stream(shards=2)
    kinesis = kinesalite.client("kinesis")
    # Both records share a partition key; the explicit keys send them to opposite ends of the hash range.
    low, high = Entry(b"low", "same", "0"), Entry(b"high", "same", str(2**128 - 1))
    landed: list[tuple[Entry, str]] = []
    put_all(kinesis, stream, [low, high], FAST_RETRY, on_stored=lambda entry, shard: landed.append((entry, shard)))
    low_shard, high_shard = list_shard_ids(kinesis, stream)
    assert [r["Data"] for r in iterate_shard(kinesis, stream, low_shard)] == [b"low"]
    assert [r["Data"] for r in iterate_shard(kinesis, stream, high_shard)] == [b"high"]
    assert landed == [(low, low_shard), (high, high_shard)]  # on_stored hears the ShardId of each answer


def test_only_failed_entries_are_retried_and_each_record_lands_once(
    kinesalite: LocalServer, lite_stream, proxy: FaultProxy, via_proxy
) -> None:
    stream = lite_stream(shards=2)
    proxy.faults = Faults(put_records_entry_failure_rate=0.3)
    entries = _entries(1500)
    told: list[Entry] = []
    stats = put_all(via_proxy, stream, entries, _patient(), on_stored=lambda entry, _shard: told.append(entry))
    assert Counter(told) == Counter(entries)  # each entry reported once, when it is stored
    assert proxy.stats["failed_entries"] > 300
    assert stats.retried_entries == proxy.stats["failed_entries"]
    assert stats.records == 1500 and stats.failed_entries == 0
    kinesis = kinesalite.client("kinesis")
    assert Counter(_stored(kinesis, stream)) == Counter(e.data for e in entries)
    # A call's failed entries are stored before the next call goes out: in each shard, the call each record
    # came from (its index // 500) never goes down.
    for shard_id in list_shard_ids(kinesis, stream):
        calls = [int(r["Data"]) // MAX_ENTRIES_PER_CALL for r in iterate_shard(kinesis, stream, shard_id)]
        assert calls == sorted(calls)


def test_steady_partial_failures_do_not_spend_the_retry_budget(
    kinesalite: LocalServer, lite_stream, proxy: FaultProxy, via_proxy
) -> None:
    # Half the entries fail in every round; with one retry per entry some of 400 would run out, but each
    # round stores some, so the budget (rounds with no progress) is never spent.
    stream = lite_stream(shards=1)
    proxy.faults = Faults(put_records_entry_failure_rate=0.5)
    entries = _entries(400)
    stats = put_all(via_proxy, stream, entries, RetryPolicy(max_retries=1, initial_interval_ms=1, max_interval_ms=2))
    assert stats.records == 400
    assert Counter(_stored(kinesalite.client("kinesis"), stream)) == Counter(e.data for e in entries)


def test_whole_call_throttling_and_5xx_are_retried(
    kinesalite: LocalServer, lite_stream, proxy: FaultProxy, via_proxy
) -> None:
    stream = lite_stream(shards=1)
    proxy.faults = Faults(throttle_rate=0.3, server_error_rate=0.2, actions=frozenset({"PutRecords"}))
    entries = _entries(1200, keys=3)
    stats = put_all(via_proxy, stream, entries, _patient())
    assert stats.retried_calls == proxy.stats["throttled"] + proxy.stats["server_error"] > 0
    assert sorted(_stored(kinesalite.client("kinesis"), stream)) == sorted(e.data for e in entries)


@pytest.mark.parametrize(
    ("faults", "stored_by_a_fault"),
    [
        (Faults(lost_answer_rate=0.3, actions=frozenset({"PutRecords"})), True),  # forwarded, then hung up
        (Faults(server_error_rate=0.3, actions=frozenset({"PutRecords"})), False),  # a 5xx, nothing forwarded
    ],
)
def test_entries_of_calls_that_went_unanswered_are_told_and_counted(
    kinesalite: LocalServer, lite_stream, proxy: FaultProxy, via_proxy, faults: Faults, stored_by_a_fault: bool
) -> None:
    stream = lite_stream(shards=1)
    proxy.faults = faults
    entries = _entries(1200, keys=3)
    told: list[Entry] = []
    stats = put_all(via_proxy, stream, entries, _patient(), on_unanswered=told.extend)
    assert stats.records == 1200 and stats.unanswered_entries == len(told) > 0
    # An entry is in the stream once, and once more for each call of it that took effect unanswered.
    extra = Counter(entry.data for entry in told) if stored_by_a_fault else Counter()
    assert Counter(_stored(kinesalite.client("kinesis"), stream)) == Counter(e.data for e in entries) + extra


def _patient() -> RetryPolicy:
    return RetryPolicy(max_retries=10, initial_interval_ms=1, max_interval_ms=5)


def test_entries_that_keep_failing_raise_with_stream_count_and_code(lite_stream, proxy: FaultProxy, via_proxy) -> None:
    stream = lite_stream(shards=1)
    proxy.faults = Faults(put_records_entry_failure_rate=1.0)
    with pytest.raises(PutRecordsFailedError) as info:
        put_all(via_proxy, stream, _entries(20), FAST_RETRY)
    error = info.value
    assert error.stream_name == stream and error.failed_entries == 20
    assert error.error_codes == Counter({"ProvisionedThroughputExceededException": 20})
    assert error.stats.failed_entries == 20 and error.stats.calls == FAST_RETRY.max_retries + 1
    assert f"stream '{stream}' failed for 20 entries" in str(error)
    assert "ProvisionedThroughputExceededException x20" in str(error)


def test_whole_call_errors_that_persist_raise(lite_stream, proxy: FaultProxy, via_proxy) -> None:
    stream = lite_stream(shards=1)
    proxy.faults = Faults(server_error_rate=1.0)
    with pytest.raises(PutRecordsFailedError, match=rf"'{stream}' failed for 5 entries") as info:
        put_all(via_proxy, stream, _entries(5), FAST_RETRY)
    assert info.value.stats.calls == FAST_RETRY.max_retries + 1
    assert info.value.stats.retried_calls == FAST_RETRY.max_retries


def test_a_missing_stream_fails_at_once_with_a_clear_message(kinesalite: LocalServer, proxy: FaultProxy) -> None:
    with pytest.raises(PutRecordsFailedError, match=r"'no-such-stream' failed .* stream does not exist") as info:
        put_all(kinesalite.client("kinesis"), "no-such-stream", _entries(3), FAST_RETRY)
    assert info.value.error_codes == Counter({"ResourceNotFoundException": 3})
    assert info.value.stats.calls == 1


def test_put_all_encodes_the_body_itself_and_the_clients_other_calls_are_untouched(
    kinesalite: LocalServer, lite_stream
) -> None:
    """botocore validates and serializes a one-entry placeholder, not the entries (``put_all`` encodes them with
    msgspec); what lands is every entry (empty data, unicode keys, an explicit hash key) and the answer's ShardIds
    reach ``on_stored``. A plain ``put_records`` on the same client afterwards is botocore's as before."""
    stream = lite_stream(shards=2)
    kinesis = kinesalite.client("kinesis")
    seen: list[list[dict]] = []
    entries = [Entry(b"", "empty"), Entry("ключ".encode(), "ключ"), Entry(bytes(range(256)), "😀", str(2**128 - 1))]
    landed: list[str] = []
    put_all(kinesis, stream, entries, FAST_RETRY, on_stored=lambda entry, shard: landed.append(shard))
    # registered after put_all's own hooks: sees what botocore goes on to validate and serialize
    kinesis.meta.events.register(
        "before-parameter-build.kinesis.PutRecords", lambda params, **_: seen.append(params["Records"])
    )
    put_all(kinesis, stream, entries, FAST_RETRY)
    assert seen == [[{"Data": b"", "PartitionKey": "-"}]]
    assert sorted(_stored(kinesis, stream)) == sorted([entry.data for entry in entries] * 2)
    assert landed[2] == list_shard_ids(kinesis, stream)[1] and len(landed) == 3
    plain = kinesis.put_records(StreamName=stream, Records=[{"Data": b"plain", "PartitionKey": "k"}])
    assert plain["FailedRecordCount"] == 0 and plain["Records"][0]["ShardId"].startswith("shardId-")


def test_two_writers_filling_one_shard_take_turns_and_store_everything(
    kinesalite: LocalServer, lite_stream, quota_proxy: QuotaProxy
) -> None:
    """Two call sequences (two tasks) on one shard, with short retry intervals: each is refused while the other's
    writes fill the shard's second, waits for a turn, and neither gives up (with that policy's backoff alone, 3
    retries from 100 ms, one writer gave up on 500 entries within 1.8 s in one run of two)."""
    stream = lite_stream(shards=1)
    client = kinesalite_quota_client(quota_proxy)
    policy = RetryPolicy(max_retries=3, initial_interval_ms=100, max_interval_ms=1000)
    halves = [[Entry(data, key) for data, key in _rows(3000)[i::2]] for i in range(2)]
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda entries: put_all(client, stream, entries, policy), halves))
    assert sum(result.records for result in results) == 3000 and not any(r.failed_entries for r in results)
    assert _stored_rows(kinesalite, stream) == Counter(_rows(3000))
    assert quota_proxy.report().tally(stream=stream, action="PutRecords").refused_records > 0


def kinesalite_quota_client(proxy: QuotaProxy):
    return aws_client("kinesis", proxy.endpoint_url)
