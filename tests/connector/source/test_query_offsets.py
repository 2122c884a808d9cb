"""``source.query_offsets.QueryOffsets``: the offsets Spark hands the reader, under both pyspark calling conventions.

The rules under test (the module's docstring, docs/source.md "pyspark 4.0.2"):

- pyspark 4.2+ (4.3 here) calls ``latestOffset(start, limit)``: the next plan comes from ``start``; with no records
  waiting the answer is ``start`` itself, and Spark runs nothing;
- pyspark 4.0.2 calls ``latestOffset()`` without a start, also before ``initialOffset`` and right after a restart:
  the last offset planned or committed stands in for it; while there is none the answer is a pending offset (a
  nonce), which ``partitions(start, end)`` resolves from ``start`` once and records in the metadata store, so a
  batch that runs again (after a restart too) resolves it identically.

The planner is a stand-in that plans "the batch after" any base; the metadata store is a real local one.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from pyspark_aws_kinesis.metadata import open_store
from pyspark_aws_kinesis.positions import AFTER_SEQUENCE_NUMBER, TRIM_HORIZON, Position
from pyspark_aws_kinesis.source import query_offsets
from pyspark_aws_kinesis.source.guards import ChangedOptionError, MissingMetadataError
from pyspark_aws_kinesis.source.offsets import KinesisOffset, PendingOffset, parse_offset
from pyspark_aws_kinesis.source.query_offsets import QueryOffsets, as_dict

KEY = "orders/shardId-000000000000"
PINNED = {"kinesis.streamName": "orders", "kinesis.kpl.deaggregate": "true"}
_sequence = itertools.count(1000)  # every plan reads to a new place: two plans of one batch differ


@dataclass
class FakeSettings:
    metadata_path: str
    pinned: dict[str, str] = field(default_factory=lambda: dict(PINNED))
    max_records_per_trigger: int | None = None

    def metadata_store(self, path: str) -> Any:
        return open_store(path)


class FakePlanner:
    """Plans the batch after ``base`` when records wait (``waiting``) or when forced; records every call."""

    def __init__(self, settings: FakeSettings):
        self.settings = settings
        self.waiting = True
        self.initials: list[tuple[str, str]] = []
        self.nexts: list[tuple[KinesisOffset, int | None, int | None, bool]] = []
        self.consumers: Any = None

    def initial(self, source_id: str, metadata_path: str) -> KinesisOffset:
        self.initials.append((source_id, metadata_path))
        return KinesisOffset(source_id, metadata_path, -1, {KEY: Position(TRIM_HORIZON)}, pinned=PINNED)

    def next(
        self, base: KinesisOffset, max_rows: int | None = None, bound_ms: int | None = None, force: bool = False
    ) -> KinesisOffset | None:
        self.nexts.append((base, max_rows, bound_ms, force))
        if not (self.waiting or force):
            return None
        position = Position(AFTER_SEQUENCE_NUMBER, str(next(_sequence)))
        return KinesisOffset(base.source_id, base.metadata_path, base.batch_id + 1, {KEY: position}, pinned=base.pinned)

    def tasks(self, offset: KinesisOffset) -> list[str]:
        return [f"task of batch {offset.batch_id}"]

    def consumer_arns(self) -> dict[str, str]:
        return {"orders": "arn:aws:kinesis:us-east-1:123456789012:stream/orders/consumer/q:1"}

    def progress_report(self) -> dict[str, Any]:
        return {"maxMillisBehindLatest": 7}


@pytest.fixture(autouse=True)
def fake_planner(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(query_offsets, "BatchPlanner", FakePlanner)


def offsets(tmp_path: Any, **settings: Any) -> tuple[QueryOffsets, FakePlanner]:
    reader = QueryOffsets(FakeSettings(str(tmp_path), **settings))  # type: ignore[arg-type]
    assert isinstance(reader.planner, FakePlanner)
    return reader, reader.planner


# --- a new query --------------------------------------------------------------------------------------------


def test_the_initial_offset_is_planned_once_and_never_changes(tmp_path) -> None:
    reader, planner = offsets(tmp_path)
    first = reader.initial()
    assert reader.initial() is first
    assert len(planner.initials) == 1
    source_id, metadata_path = planner.initials[0]
    assert metadata_path == str(tmp_path)
    assert offsets(tmp_path)[0].initial().source_id != source_id  # another query, another id


def test_as_dict_is_the_json_object_spark_stores(tmp_path) -> None:
    reader, _ = offsets(tmp_path)
    initial = reader.initial()
    assert as_dict(initial) == initial.to_dict()
    assert parse_offset(as_dict(initial)) == initial


# --- pyspark 4.2+: latestOffset(start, limit) ---------------------------------------------------------------


def test_pyspark_4_3_plans_the_next_batch_from_the_start_it_passes(tmp_path) -> None:
    reader, planner = offsets(tmp_path)
    start = as_dict(reader.initial())
    end = parse_offset(reader.latest(start, 500))
    assert planner.nexts == [(parse_offset(start), 500, None, False)]
    assert isinstance(end, KinesisOffset) and end.batch_id == 0


def test_with_no_records_waiting_the_answer_is_the_start_itself(tmp_path) -> None:
    reader, planner = offsets(tmp_path)
    start = as_dict(reader.initial())
    planner.waiting = False
    assert reader.latest(start, None) == start  # Spark runs nothing for start == end


def test_trigger_available_now_bounds_the_plan(tmp_path) -> None:
    reader, planner = offsets(tmp_path)
    reader.available_now_ms = 1_700_000_000_000
    reader.latest(as_dict(reader.initial()), None)
    assert planner.nexts[-1][2] == 1_700_000_000_000


def test_an_offset_spark_hands_back_is_not_parsed_again(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    # ~10 µs a shard each trigger; Spark hands back, as JSON read again, the offset last committed
    reader, planner = offsets(tmp_path)
    start = as_dict(reader.initial())
    end = reader.latest(start, None)
    reader.batch(start, end)
    parsed: list[dict[str, Any]] = []
    monkeypatch.setattr(query_offsets, "parse_offset", lambda raw: parsed.append(raw) or parse_offset(raw))
    assert reader.committed(end) == parse_offset(end)  # the end batch() has just parsed
    reader.latest(json.loads(json.dumps(end)), None)
    assert parsed == [] and planner.nexts[-1][0] == parse_offset(end)
    reader.latest(start, None)  # another start (an older checkpoint): parsed
    assert parsed == [start] and planner.nexts[-1][0] == parse_offset(start)


def test_pyspark_4_3_plans_each_batch_from_the_start_spark_passes_not_from_memory(tmp_path) -> None:
    reader, planner = offsets(tmp_path)
    start = as_dict(reader.initial())
    first = reader.latest(start, None)
    reader.batch(start, first)
    reader.latest(start, None)  # Spark asks again from the same start (e.g. the batch was not run yet)
    assert planner.nexts[-1][0] == parse_offset(start)


# --- pyspark 4.0.2: latestOffset() ----------------------------------------------------------------------------


def test_pyspark_4_0_2_knowing_nothing_gets_a_pending_offset(tmp_path) -> None:
    reader, planner = offsets(tmp_path)
    answer = reader.latest(None, None)
    pending = parse_offset(answer)
    assert isinstance(pending, PendingOffset)
    assert pending.metadata_path == str(tmp_path)
    assert reader.latest(None, None) == answer  # the same nonce until it is resolved
    assert planner.nexts == []  # no plan without a start


def test_a_pending_offset_is_resolved_from_the_batchs_start_and_recorded(tmp_path) -> None:
    reader, planner = offsets(tmp_path, max_records_per_trigger=300)
    start = as_dict(reader.initial())
    pending = reader.latest(None, None)
    planner.waiting = False  # a pending offset cannot wait for records: it is planned even so
    resolved = reader.batch(start, pending)
    assert planner.nexts == [(parse_offset(start), 300, None, True)]
    assert resolved.batch_id == 0
    nonce = pending["pending"]
    assert parse_offset(open_store(str(tmp_path)).get_document(nonce)) == resolved


def test_a_pending_batch_that_runs_again_after_a_restart_resolves_identically(tmp_path) -> None:
    reader, _ = offsets(tmp_path)
    start = as_dict(reader.initial())
    pending = reader.latest(None, None)
    first = reader.batch(start, pending)
    restarted, planner = offsets(tmp_path)  # a new driver: its planner would plan other positions
    again = restarted.batch(start, pending)
    assert again == first
    assert planner.nexts == []  # resolved from the record, not planned again


def test_pyspark_4_0_2_plans_from_the_last_batch_planned(tmp_path) -> None:
    reader, planner = offsets(tmp_path)
    start = as_dict(reader.initial())
    pending = reader.latest(None, None)
    resolved = reader.batch(start, pending)
    following = parse_offset(reader.latest(None, None))
    assert planner.nexts[-1][0] == resolved
    assert isinstance(following, KinesisOffset) and following.batch_id == resolved.batch_id + 1


def test_pyspark_4_0_2_with_no_records_answers_the_end_as_spark_knows_it(tmp_path) -> None:
    """The last batch's end was pending: the answer is that pending offset again, which Spark compares with the
    end it holds (start == end: no batch), not its resolution."""
    reader, planner = offsets(tmp_path)
    start = as_dict(reader.initial())
    pending = reader.latest(None, None)
    reader.batch(start, pending)
    planner.waiting = False
    assert reader.latest(None, None) == pending


def test_pyspark_4_0_2_plans_from_the_last_batch_committed_after_a_restart(tmp_path) -> None:
    reader, _ = offsets(tmp_path)
    start = as_dict(reader.initial())
    end = reader.latest(start, None)
    restarted, planner = offsets(tmp_path)
    assert isinstance(parse_offset(restarted.latest(None, None)), PendingOffset)  # before Spark told it anything
    restarted.committed(end)
    following = parse_offset(restarted.latest(None, None))
    assert planner.nexts[-1][0] == parse_offset(end)
    assert isinstance(following, KinesisOffset) and following.batch_id == 1


def test_a_committed_pending_offset_stands_for_its_recorded_resolution(tmp_path) -> None:
    reader, _ = offsets(tmp_path)
    start = as_dict(reader.initial())
    pending = reader.latest(None, None)
    resolved = reader.batch(start, pending)
    restarted, planner = offsets(tmp_path)
    assert restarted.committed(pending) == resolved
    restarted.latest(None, None)
    assert planner.nexts[-1][0] == resolved


def test_an_older_batch_committed_late_does_not_take_the_newer_ones_place(tmp_path) -> None:
    reader, planner = offsets(tmp_path)
    start = as_dict(reader.initial())
    end0 = reader.latest(start, None)
    reader.batch(start, end0)
    end1 = reader.latest(end0, None)
    reader.batch(end0, end1)
    reader.committed(end0)  # Spark commits batch 0 after planning batch 1
    reader.latest(None, None)
    assert planner.nexts[-1][0] == parse_offset(end1)


def test_a_pending_offset_whose_resolution_the_store_lost_fails_naming_the_store(tmp_path) -> None:
    reader, _ = offsets(tmp_path)
    start = as_dict(reader.initial())
    pending = reader.latest(None, None)
    reader.batch(start, pending)
    (tmp_path / "pending" / f"{pending['pending']}.json").unlink()  # the store was emptied
    restarted, _ = offsets(tmp_path)
    with pytest.raises(MissingMetadataError) as info:
        restarted.committed(pending)
    assert str(tmp_path) in str(info.value) and pending["pending"] in str(info.value)
    with pytest.raises(MissingMetadataError):
        restarted.latest(pending, None)  # pyspark 4.3 handed a pending start from a 4.0.2 run


# --- the checks and the forwarding --------------------------------------------------------------------------


def test_a_batch_planned_under_other_row_deciding_options_is_refused(tmp_path) -> None:
    reader, _ = offsets(tmp_path)
    start = as_dict(reader.initial())
    end = reader.latest(start, None)
    restarted, _ = offsets(tmp_path, pinned={**PINNED, "kinesis.kpl.deaggregate": "false"})
    with pytest.raises(ChangedOptionError, match=r"kinesis\.kpl\.deaggregate"):
        restarted.batch(start, end)
    assert offsets(tmp_path)[0].batch(start, end) == parse_offset(end)  # the same options: the same batch


def test_tasks_consumers_progress_and_release_go_to_the_planner(tmp_path) -> None:
    reader, planner = offsets(tmp_path)
    initial = reader.initial()
    assert reader.tasks(initial) == ["task of batch -1"]
    assert reader.consumer_arns() == planner.consumer_arns()
    assert reader.progress_report() == {"maxMillisBehindLatest": 7}
    reader.release()  # GetRecords: no consumers, nothing to release

    class Consumers:
        released = 0

        def release(self) -> None:
            self.released += 1

    planner.consumers = Consumers()
    reader.release()
    assert planner.consumers.released == 1
