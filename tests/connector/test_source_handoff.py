"""Iterator handoff: a read or probe that ends where the next one starts hands its GetRecords iterator on, so the
next probe or read of the shard asks GetRecords without GetShardIterator first (counted at the fault proxy);
an iterator Kinesis refuses falls back to GetShardIterator at the same position; what is read stays exact."""

from __future__ import annotations

import pickle
import time
from dataclasses import replace

from source_util import next_batch, payloads, put_numbered, read_all, reader, roundtrip, source_options
from test_source_range import CONTEXT, ListTransport, _page

from localaws import LocalServer
from localaws.fault_proxy import FaultProxy, Faults
from pyspark_aws_kinesis.clock import now_ms
from pyspark_aws_kinesis.fetch.iterators import ITERATOR_MAX_AGE_MS, Handoff
from pyspark_aws_kinesis.fetch.range import FetchLimits, ShardRange, ShardTask
from pyspark_aws_kinesis.fetch.reads import STOP_BOUND, STOP_CAUGHT_UP, STOP_LIMIT, ShardRead
from pyspark_aws_kinesis.positions import (
    AFTER_SEQUENCE_NUMBER,
    AT_SEQUENCE_NUMBER,
    TRIM_HORIZON,
    WHOLE_RECORD,
    Position,
    shard_key,
)
from pyspark_aws_kinesis.source.offsets import parse_offset
from pyspark_aws_kinesis.source.probe_answers import Found

SHARD = "shardId-000000000000"


class IteratorTransport(ListTransport):
    """Pages from a list, whose next_iterator stands for GetRecords' NextShardIterator."""

    hands_off_iterators = True


def _handed(pages, limits: FetchLimits | None = None, start: Position | None = None, transport=None):
    """Rows read and the ShardRead of one read over ``pages`` (from TRIM_HORIZON unless ``start``)."""
    task = ShardTask("s", "shardId-0", 0, 2**128 - 1, start or Position(TRIM_HORIZON))
    shard_range = ShardRange(task, limits or FetchLimits(), CONTEXT)
    transport = transport or IteratorTransport(pages)
    rows = [seq for page, begin, stop in shard_range.slices(transport) for seq in page.sequences[begin:stop]]
    assert shard_range.result is not None
    return rows, shard_range.result


def test_a_read_hands_on_its_last_iterator_only_when_it_points_where_the_next_read_starts() -> None:
    # Caught up after consuming every page whole: the last (empty) page's iterator, after record 3.
    rows, read = _handed([_page([1, 2], next_="i1"), _page([3], next_="i2"), _page([], next_="i3", behind=0)])
    assert rows == ["1", "2", "3"] and read.stop == STOP_CAUGHT_UP and read.next_iterator == "i3"
    assert read.iterator_ms is not None and abs(read.iterator_ms - now_ms()) < 60_000
    # A cap that falls on a page's end consumed it whole; one inside a page did not.
    rows, read = _handed([_page([1, 2], next_="i1"), _page([3, 4])], FetchLimits(max_records=2))
    assert rows == ["1", "2"] and read.stop == STOP_LIMIT and read.next_iterator == "i1"
    rows, read = _handed([_page([1, 2, 3], next_="i1")], FetchLimits(max_records=2))
    assert rows == ["1", "2"] and read.stop == STOP_LIMIT and read.next_iterator is None
    # The arrival bound inside a page (arrivals are sequence * 1 ms in _page).
    rows, read = _handed([_page([1, 2, 3], next_="i1")], FetchLimits(stop_after_ms=2))
    assert rows == ["1", "2"] and read.stop == STOP_BOUND and read.next_iterator is None
    # The page's last Kinesis record gave no row (e.g. KPL sub-records out of the shard's range): the next read
    # starts after record 2, the iterator after record 3.
    lost_tail = _page([1, 2], next_="i1", behind=0)
    lost_tail.kinesis_records, lost_tail.last_sequence = 3, "3"
    rows, read = _handed([lost_tail, _page([], next_="i2", behind=0)])
    assert rows == ["1", "2"] and read.next_iterator is None
    # A start inside an aggregate whose remaining rows are all skipped: the next read starts where this one did.
    inside = Position(AFTER_SEQUENCE_NUMBER, "1", 0)
    rows, read = _handed([_page([1], next_="i1"), _page([], next_="i2", behind=0)], start=inside)
    assert rows == [] and read.next_start() == inside and read.next_iterator is None
    # Nothing at all: the empty page's iterator stands where the read started.
    rows, read = _handed([_page([], next_="i1", behind=0)], start=Position(AT_SEQUENCE_NUMBER, "7", 0))
    assert rows == [] and read.next_iterator == "i1"
    # A transport whose next_iterator is not a GetRecords iterator (SubscribeToShard's continuation): nothing.
    rows, read = _handed(None, transport=ListTransport([_page([1], next_="9"), _page([], next_="9", behind=0)]))
    assert rows == ["1"] and read.next_iterator is None


def test_shard_reads_keep_the_iterator_and_old_documents_load_without_it() -> None:
    read = ShardRead("s", SHARD, Position(TRIM_HORIZON), 2, "5", next_iterator="it", iterator_ms=123)
    assert ShardRead.from_json(read.to_json()) == read
    old = replace(read, next_iterator=None, iterator_ms=None).to_json()
    assert "nextShardIterator" not in old and ShardRead.from_json(old).next_iterator is None
    assert read.same_range(replace(read, next_iterator="another"))  # a hint, not part of the range


def test_a_handoff_is_used_only_at_its_position_and_while_fresh() -> None:
    at = Position(AFTER_SEQUENCE_NUMBER, "5", WHOLE_RECORD)
    assert Handoff.received(at, "it").usable_for(at)
    assert not Handoff.received(at, "it").usable_for(Position(AFTER_SEQUENCE_NUMBER, "6", WHOLE_RECORD))
    assert not Handoff(at, "it", now_ms() - ITERATOR_MAX_AGE_MS).usable_for(at)


def _proxied_source(kinesalite: LocalServer, stream: str, tmp_path, proxy: FaultProxy, **extra: str):
    options = source_options(kinesalite, stream, tmp_path, **extra)
    return reader(options | {"kinesis.endpointUrl": proxy.endpoint_url})


def _idle_triggers(source, start: dict, count: int) -> None:
    for _ in range(count):
        time.sleep(source.offsets.planner.prober.interval_s)  # past the probe interval: every shard asked again
        assert roundtrip(source.latestOffset(start, None)) == start


def test_probes_and_reads_continue_with_the_iterators_they_were_handed(
    kinesalite: LocalServer, lite_stream, tmp_path
) -> None:
    stream = lite_stream(shards=2)
    with FaultProxy(kinesalite.endpoint_url) as proxy:
        source = _proxied_source(kinesalite, stream, tmp_path, proxy)
        start = roundtrip(source.initialOffset())
        _idle_triggers(source, start, 1)  # each shard: GetShardIterator once, then GetRecords only
        opened = proxy.calls["GetShardIterator"]  # 2, or more if the proxy saw a request retried
        assert opened >= 2, proxy.calls
        first = put_numbered(kinesalite, stream, "a", 6)
        end, rows = next_batch(source, start)  # probes found records; the reads start with the probes' iterators
        assert sorted(payloads(rows)) == sorted(first)
        _idle_triggers(source, end, 3)  # probes start with the reads' last iterators
        second = put_numbered(kinesalite, stream, "b", 4)
        following, rows = next_batch(source, end)
        assert sorted(payloads(rows)) == sorted(second)
        # The driver completes a batch nobody read, with the iterator the probe handed it.
        third = put_numbered(kinesalite, stream, "c", 4)
        skipped = roundtrip(source.latestOffset(following, None))
        assert skipped != following
        source.commit(skipped)
        _idle_triggers(source, skipped, 1)  # completes the reads (they hand their iterators on), nothing new
        fourth = put_numbered(kinesalite, stream, "d", 4)
        _, rows = next_batch(source, skipped)
        assert sorted(payloads(rows)) == sorted(fourth) and not set(payloads(rows)) & set(third)
        assert proxy.calls["GetShardIterator"] == opened, proxy.calls  # never again after each shard's first


def test_a_read_stopped_at_a_cap_on_a_page_end_hands_its_iterator_to_the_next_batch(
    kinesalite: LocalServer, lite_stream, tmp_path
) -> None:
    stream = lite_stream(shards=1)
    produced = put_numbered(kinesalite, stream, "r", 5)
    with FaultProxy(kinesalite.endpoint_url) as proxy:
        source = _proxied_source(kinesalite, stream, tmp_path, proxy, **{"kinesis.maxFetchRecordsPerShard": "3"})
        start = roundtrip(source.initialOffset())
        end, rows = next_batch(source, start)  # GetRecords Limit 3: a page of 3, consumed whole
        assert payloads(rows) == produced[:3]
        opened = proxy.calls["GetShardIterator"]  # the first probe's
        assert opened >= 1, proxy.calls
        store = source.settings.metadata_store(str(tmp_path))
        read = store.get_shard_read(parse_offset(end).source_id, 0, stream, SHARD)
        assert read is not None and read.stop == STOP_LIMIT and read.next_iterator is not None
        following = roundtrip(source.latestOffset(end, None))  # planned without a probe (a cap stop)
        partitions = list(source.partitions(end, following))
        assert payloads(read_all(source, partitions)) == produced[3:]  # read with the handed iterator
        assert payloads(read_all(source, partitions)) == produced[3:]  # the task again: the same records
        assert proxy.calls["GetShardIterator"] == opened, proxy.calls


def test_a_refused_iterator_falls_back_to_the_same_position(kinesalite: LocalServer, lite_stream, tmp_path) -> None:
    stream = lite_stream(shards=1)
    with FaultProxy(kinesalite.endpoint_url) as proxy:
        source = _proxied_source(kinesalite, stream, tmp_path, proxy)
        start = roundtrip(source.initialOffset())
        first = put_numbered(kinesalite, stream, "a", 3)
        end, rows = next_batch(source, start)
        assert payloads(rows) == first
        opened = proxy.calls["GetShardIterator"]
        # The probe's handed iterator expired: a new one at the same position finds the new records.
        proxy.faults = Faults(expired_iterator_rate=1.0, max_faults=1, actions=frozenset({"GetRecords"}))
        second = put_numbered(kinesalite, stream, "b", 2)
        following = roundtrip(source.latestOffset(end, None))
        assert following != end and proxy.stats["expired_iterator"] == 1
        assert proxy.calls["GetShardIterator"] > opened
        opened = proxy.calls["GetShardIterator"]
        # The read's handed iterator is one Kinesis does not know: refused, opened again at the batch's start.
        (partition,) = source.partitions(end, following)
        (task,) = partition.tasks
        assert task.handoff is not None
        bogus = replace(task.handoff, iterator=task.handoff.iterator[::-1])
        partition = replace(partition, tasks=(replace(task, handoff=bogus, held=None),))  # no probe answer held
        rows = read_all(source, [pickle.loads(pickle.dumps(partition))])
        assert payloads(rows) == second
        assert proxy.calls["GetShardIterator"] > opened


def test_a_probe_handed_an_iterator_kinesis_refuses_opens_one_at_the_same_position(
    kinesalite: LocalServer, lite_stream
) -> None:
    stream = lite_stream(shards=1)
    put_numbered(kinesalite, stream, "r", 2)
    with FaultProxy(kinesalite.endpoint_url) as proxy:
        source = _proxied_source(kinesalite, stream, "unused", proxy)
        prober = source.offsets.planner.prober
        key, at = shard_key(stream, SHARD), Position(TRIM_HORIZON)
        (result,) = prober.probe({key: at}, handoffs={key: Handoff.received(at, "not-an-iterator")}).values()
        assert result.found is Found.DATA and proxy.calls["GetShardIterator"] >= 1
        assert prober.handoff(key, at) is not None  # the iterator that found the record, for the batch's read


def test_a_held_answers_expired_iterator_is_replaced_after_its_last_record(
    kinesalite: LocalServer, lite_stream, tmp_path
) -> None:
    stream = lite_stream(shards=1)
    first = put_numbered(kinesalite, stream, "a", 4)
    with FaultProxy(kinesalite.endpoint_url) as proxy:
        source = _proxied_source(kinesalite, stream, tmp_path, proxy)
        start = roundtrip(source.initialOffset())
        end = roundtrip(source.latestOffset(start, None))  # the probe holds the first record (Limit 1)
        (partition,) = source.partitions(start, end)
        assert partition.tasks[0].held is not None
        opened = proxy.calls["GetShardIterator"]
        proxy.faults = Faults(expired_iterator_rate=1.0, max_faults=1, actions=frozenset({"GetRecords"}))
        rows = read_all(source, [pickle.loads(pickle.dumps(partition))])
        assert payloads(rows) == first  # each record once: the new iterator starts after the held record
        assert proxy.stats["expired_iterator"] == 1 and proxy.calls["GetShardIterator"] == opened + 1
