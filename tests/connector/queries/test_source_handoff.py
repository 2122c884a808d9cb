"""Iterator handoff through the source: a read or probe that ends where the next one starts hands its GetRecords
iterator on, so the next probe or read of the shard asks GetRecords without GetShardIterator first (counted at the
fault proxy); an iterator Kinesis refuses falls back to GetShardIterator at the same position; what is read stays
exact. The handoff's own rules: tests/connector/fetch/test_iterators.py and test_range.py."""

from __future__ import annotations

import pickle
import time
from dataclasses import replace

from localaws import LocalServer
from localaws.fault_proxy import FaultProxy, Faults
from pyspark_aws_kinesis.fetch.iterators import Handoff
from pyspark_aws_kinesis.fetch.reads import STOP_LIMIT
from pyspark_aws_kinesis.positions import TRIM_HORIZON, Position, shard_key
from pyspark_aws_kinesis.source.offsets import parse_offset
from pyspark_aws_kinesis.source.probe_answers import Found
from tests.connector.support.handoff_util import SHARD
from tests.connector.support.source_util import (
    next_batch,
    payloads,
    put_numbered,
    read_all,
    reader,
    roundtrip,
    source_options,
)


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
