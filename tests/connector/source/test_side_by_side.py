"""A partition's shards are read side by side (``source.side_by_side``), over simulated transports (no server):
every shard is asked before any finishes, each shard's rows keep their order, an error in one shard fails the
read with that error and stops the others, closing the read stops every shard's thread and records no unfinished
shard, a replay reads exactly the recorded ranges, and a read taken whole hands back freed memory. Counts and event
orders, never timings: a wait on an event has a long fail-safe only so that a broken reader fails instead of
hanging."""

from __future__ import annotations

import pickle
import threading
from collections.abc import Callable, Iterator

import pytest

from pyspark_aws_kinesis.fetch.decode import Page
from pyspark_aws_kinesis.fetch.range import ShardTask
from pyspark_aws_kinesis.positions import TRIM_HORIZON, Position
from pyspark_aws_kinesis.source import stream_reader
from pyspark_aws_kinesis.source.batch_reader import BatchPartition, KinesisBatchReader
from pyspark_aws_kinesis.source.settings import SourceSettings
from pyspark_aws_kinesis.source.side_by_side import side_by_side
from pyspark_aws_kinesis.source.stream_reader import KinesisPartition, KinesisStreamReader
from tests.connector.support.range_util import _page

FAIL_SAFE_S = 10.0  # a reader that never lets the awaited event happen fails after this, instead of hanging
SOURCE_ID = "side-by-side"


class Shards:
    """Simulated transports, one per shard id, logging ("call", shard) before each page and ("end", shard) when a
    shard's pages are over; ``script[shard]`` makes a shard's pages (it may wait on events or raise)."""

    def __init__(self, script: dict[str, Callable[[Shards, str], Iterator[Page]]]):
        self.script = script
        self.log: list[tuple[str, str]] = []
        self.closed: list[str] = []  # shards whose page iterator ended or was closed
        self.lock = threading.Lock()
        self.all_called = threading.Event()
        self.failed = threading.Event()

    def note(self, event: str, shard: str) -> None:
        with self.lock:
            self.log.append((event, shard))
            if {s for e, s in self.log if e == "call"} == set(self.script):
                self.all_called.set()

    def transport(self, shard: str) -> Transport:
        return Transport(self, shard)


class Transport:
    def __init__(self, shards: Shards, shard: str):
        self.shards, self.shard = shards, shard
        self.refused_calls = 0

    def pages(self, start: Position, wanted: Callable[[], int | None]) -> Iterator[Page]:
        try:
            for page in self.shards.script[self.shard](self.shards, self.shard):
                self.shards.note("call", self.shard)
                if page.next_iterator is None:
                    self.shards.note("end", self.shard)  # the shard's last page: its read ends with it
                yield page
        finally:
            self.shards.closed.append(self.shard)


def numbered(first: int, count: int, last: bool = False) -> Page:
    return _page(list(range(first, first + count)), next_=None if last else "more")


def two_pages_after_all_called(shards: Shards, shard: str) -> Iterator[Page]:
    """A page, then (once every shard was asked) the shard's last page."""
    yield numbered(1, 2)
    shards.all_called.wait(FAIL_SAFE_S)
    yield numbered(3, 2, last=True)


def endless(shards: Shards, shard: str) -> Iterator[Page]:
    """Pages until the reader stops asking (at most 200, as a fail-safe)."""
    for n in range(200):
        yield numbered(1 + 10 * n, 10)


@pytest.fixture
def simulated(monkeypatch: pytest.MonkeyPatch) -> Callable[[Shards], None]:
    """Route every shard's transport to ``Shards``."""

    def install(shards: Shards) -> None:
        def transport(self, kinesis, task: ShardTask, consumer_arn=None):
            return shards.transport(task.shard_id)

        monkeypatch.setattr(SourceSettings, "transport", transport)

    return install


def options(tmp_path, **extra: str) -> dict[str, str]:
    return {
        "kinesis.streamname": "s",
        "kinesis.region": "us-east-1",
        "kinesis.endpointurl": "http://127.0.0.1:9",  # never called: the transports are simulated
        "kinesis.awsaccesskeyid": "x",
        "kinesis.awssecretkey": "y",
        "kinesis.metadatapath": str(tmp_path),
        "kinesis.startingposition": "TRIM_HORIZON",
        **{key.lower(): value for key, value in extra.items()},
    }


def task(shard: str) -> ShardTask:
    return ShardTask("s", shard, 0, 2**128 - 1, Position(TRIM_HORIZON))


def partition(tmp_path, shard_ids: list[str]) -> KinesisPartition:
    return KinesisPartition(0, SOURCE_ID, str(tmp_path), tuple(task(shard) for shard in shard_ids))


def executor(tmp_path, **extra: str) -> KinesisStreamReader:
    return pickle.loads(pickle.dumps(KinesisStreamReader(None, options(tmp_path, **extra))))  # type: ignore[arg-type]


def recorded(source: KinesisStreamReader, tmp_path, shard_ids: list[str]) -> dict:
    store = source.settings.metadata_store(str(tmp_path))
    reads = store.get_shard_reads(SOURCE_ID, 0, [("s", shard) for shard in shard_ids])
    return {shard: read for (_stream, shard), read in reads.items() if read is not None}


def rows_by_shard(batches) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for batch in batches:
        for row in batch.to_pylist():
            out.setdefault(row["shardId"], []).append(int(row["sequenceNumber"]))
    return out


def lane_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.startswith("read 0 ")]


SHARD_IDS = ["shardId-1", "shardId-2", "shardId-3"]


def test_every_shard_of_a_partition_is_asked_before_any_finishes(simulated, tmp_path) -> None:
    shards = Shards(dict.fromkeys(SHARD_IDS, two_pages_after_all_called))
    simulated(shards)
    source = executor(tmp_path)
    rows = rows_by_shard(source.read(partition(tmp_path, SHARD_IDS)))
    first_end = next(i for i, (event, _shard) in enumerate(shards.log) if event == "end")
    asked = {shard for event, shard in shards.log[:first_end] if event == "call"}
    assert asked == set(SHARD_IDS), f"asked before the first shard ended: {sorted(asked)}; log {shards.log}"
    assert rows == {key: [1, 2, 3, 4] for key in SHARD_IDS}  # every shard whole, in its order
    assert set(recorded(source, tmp_path, SHARD_IDS)) == set(SHARD_IDS)


def test_an_error_in_one_shard_fails_the_read_with_it_and_stops_the_others(simulated, tmp_path) -> None:
    def fails(shards: Shards, shard: str) -> Iterator[Page]:
        yield numbered(1, 1)
        shards.failed.set()
        raise RuntimeError(f"simulated failure reading {shard}")

    def waits_for_the_failure(shards: Shards, shard: str) -> Iterator[Page]:
        yield numbered(1, 1)
        shards.failed.wait(FAIL_SAFE_S)
        yield from endless(shards, shard)

    shards = Shards({"shardId-1": waits_for_the_failure, "shardId-2": fails, "shardId-3": waits_for_the_failure})
    simulated(shards)
    source = executor(tmp_path)
    with pytest.raises(RuntimeError, match="simulated failure reading shardId-2"):
        rows_by_shard(source.read(partition(tmp_path, SHARD_IDS)))
    assert lane_threads() == []
    assert sorted(shards.closed) == SHARD_IDS  # every shard's iterator was closed
    assert ("end", "shardId-1") not in shards.log and ("end", "shardId-3") not in shards.log
    assert recorded(source, tmp_path, SHARD_IDS) == {}


def test_closing_the_read_stops_every_shards_thread_and_records_no_unfinished_shard(simulated, tmp_path) -> None:
    def one_page(shards: Shards, shard: str) -> Iterator[Page]:
        yield numbered(1, 3, last=True)

    shards = Shards({"shardId-1": one_page, "shardId-2": endless, "shardId-3": endless})
    simulated(shards)
    source = executor(tmp_path)
    before = threading.active_count()
    batches = source.read(partition(tmp_path, SHARD_IDS))
    taken = [next(batches) for _ in range(4)]  # Spark takes a few batches, then a LIMIT closes the read
    assert len(lane_threads()) >= 2  # the endless shards are still being read
    batches.close()
    assert lane_threads() == [] and threading.active_count() <= before
    assert sorted(shards.closed) == SHARD_IDS
    calls = len(shards.log)
    assert calls < 2 * 200, "the endless shards were read to their end"
    read = recorded(source, tmp_path, SHARD_IDS)
    assert "shardId-2" not in read and "shardId-3" not in read
    # shardId-1 is recorded only if Spark took all its rows before the close
    shard_1_taken = sum(1 for batch in taken for row in batch.to_pylist() if row["shardId"] == "shardId-1")
    assert "shardId-1" not in read or shard_1_taken == 3


def test_a_replay_reads_exactly_the_recorded_ranges_side_by_side(simulated, tmp_path) -> None:
    def more_each_time(shards: Shards, shard: str) -> Iterator[Page]:
        yield numbered(1, 3)
        shards.all_called.wait(FAIL_SAFE_S)
        yield numbered(4, 3)
        yield numbered(7, 3)
        yield _page([], behind=0)

    shards = Shards(dict.fromkeys(SHARD_IDS, more_each_time))
    simulated(shards)
    capped = executor(tmp_path, **{"kinesis.maxFetchRecordsPerShard": "5"})
    first = rows_by_shard(capped.read(partition(tmp_path, SHARD_IDS)))
    assert first == {key: [1, 2, 3, 4, 5] for key in SHARD_IDS}
    reads = recorded(capped, tmp_path, SHARD_IDS)
    # The batch runs again (a task retry) with other limits: the recorded ranges win, shard by shard.
    again = rows_by_shard(executor(tmp_path).read(partition(tmp_path, SHARD_IDS)))
    assert again == first
    assert recorded(capped, tmp_path, SHARD_IDS) == reads


def test_the_batch_reader_reads_its_shards_side_by_side(simulated, tmp_path) -> None:
    shards = Shards(dict.fromkeys(SHARD_IDS, two_pages_after_all_called))
    simulated(shards)
    batch_reader = KinesisBatchReader(None, options(tmp_path))  # type: ignore[arg-type]
    rows = rows_by_shard(batch_reader.read(BatchPartition(tuple((task(shard), None) for shard in SHARD_IDS), None)))
    first_end = next(i for i, (event, _shard) in enumerate(shards.log) if event == "end")
    assert {shard for event, shard in shards.log[:first_end] if event == "call"} == set(SHARD_IDS)
    assert rows == {key: [1, 2, 3, 4] for key in SHARD_IDS}


def test_the_queue_between_shards_and_the_task_is_bounded() -> None:
    handed = {"a": 0, "b": 0}

    def counting(name: str) -> Callable[[], Iterator[int]]:
        def items() -> Iterator[int]:
            for n in range(1000):
                handed[name] += 1
                yield n

        return items

    reader = side_by_side([counting("a"), counting("b")], name="bounded")
    first = next(reader)
    # The task took one item and stopped asking: each lane hands over at most the queue's room plus one in hand.
    for thread in threading.enumerate():
        if thread.name.startswith("bounded "):
            thread.join(0.5)  # lanes block on the full queue; give them the chance to overrun it if they could
    assert first == 0
    assert sum(handed.values()) <= 2 + 2 + 1, handed  # capacity 2, one item in hand per lane, the one taken
    reader.close()
    assert [t for t in threading.enumerate() if t.name.startswith("bounded ")] == []


def test_a_process_has_a_connection_for_each_call_its_shards_make_side_by_side(tmp_path) -> None:
    for per_partition in ("1", "16"):
        settings = SourceSettings.from_options(options(tmp_path, **{"kinesis.shardsPerPartition": per_partition}))
        # Each shard: its call and the one asked ahead; never fewer than botocore's default pool.
        assert settings.client.max_pool_connections >= max(10, 2 * int(per_partition))


def test_a_read_taken_whole_hands_back_freed_memory_after_its_last_row(
    simulated, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``KinesisStreamReader.read`` ends with ``release_freed_memory`` (tests/connector/test_freed_memory.py)."""
    releases: list[int] = []
    monkeypatch.setattr(stream_reader, "release_freed_memory", lambda: releases.append(1))
    simulated(Shards(dict.fromkeys(SHARD_IDS, two_pages_after_all_called)))
    batches = executor(tmp_path).read(partition(tmp_path, SHARD_IDS))
    assert next(batches).num_rows and not releases
    assert len(list(batches)) >= 1 and releases == [1]
