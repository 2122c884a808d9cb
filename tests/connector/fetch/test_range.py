"""The range rules on their own (``pyspark_aws_kinesis.fetch.range``), over a transport that is not GetRecords: the
``ShardTransport`` seam an enhanced fan-out transport plugs into. A cap stops inside a page, the arrival bound and a
replay, a read planned without a bound, a start that is gone, a page at the tip, and which iterator a read hands on."""

from __future__ import annotations

import pytest

from pyspark_aws_kinesis.clock import now_ms
from pyspark_aws_kinesis.fetch.decode import Page
from pyspark_aws_kinesis.fetch.range import FetchLimits, ReplayError, ShardRange, ShardTask
from pyspark_aws_kinesis.fetch.reads import (
    STOP_BOUND,
    STOP_CAUGHT_UP,
    STOP_LIMIT,
    STOP_SHARD_END,
    DataLossEvent,
    ShardRead,
)
from pyspark_aws_kinesis.positions import (
    AFTER_SEQUENCE_NUMBER,
    AT_SEQUENCE_NUMBER,
    TRIM_HORIZON,
    WHOLE_RECORD,
    Position,
)
from tests.connector.support.range_util import CONTEXT, ListTransport, _page, _read


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


def _tip(page):
    page.at_tip = True
    return page


def test_a_page_at_the_tip_ends_a_read_unless_the_read_has_a_fixed_end() -> None:
    transport = ListTransport([_tip(_page([1, 2], behind=0)), _page([3])])
    rows, result = _read(transport)
    assert rows == ["1", "2"] and result.stop == STOP_CAUGHT_UP
    assert len(transport.wanted) == 1  # the next page was never asked for
    # A replay must reach its recorded last record, whatever the transport says about the tip.
    recorded = ShardRead("s", "shardId-0", Position(TRIM_HORIZON), 3, "3", 0)
    rows, result = _read(ListTransport([_tip(_page([1, 2], behind=0)), _page([3])]), replay=recorded)
    assert rows == ["1", "2", "3"] and result == recorded


def test_a_cap_stops_inside_a_page_and_sizes_requests() -> None:
    transport = ListTransport([_page([1, 2, 3]), _page([4, 5, 6])])
    rows, result = _read(transport, FetchLimits(max_records=4))
    assert rows == ["1", "2", "3", "4"] and result.stop == STOP_LIMIT
    assert result.next_start() == Position(AFTER_SEQUENCE_NUMBER, "4", WHOLE_RECORD)
    assert transport.wanted == [4, 1]


def test_shard_end_and_caught_up() -> None:
    rows, result = _read(ListTransport([_page([1]), _page([2], next_=None)]))
    assert rows == ["1", "2"] and result.stop == STOP_SHARD_END and result.shard_end
    rows, result = _read(ListTransport([_page([1]), _page([], behind=0)]))
    assert rows == ["1"] and result.stop == STOP_CAUGHT_UP and not result.shard_end


def test_the_arrival_bound_and_a_replay_ignore_the_cap_only_where_they_should() -> None:
    rows, _result = _read(ListTransport([_page([1, 2, 3])]), FetchLimits(stop_after_ms=2))
    assert rows == ["1", "2"]
    recorded = ShardRead("s", "shardId-0", Position(TRIM_HORIZON), 3, "3", 0)
    rows, result = _read(ListTransport([_page([1, 2]), _page([3, 4])]), FetchLimits(max_records=1), replay=recorded)
    assert rows == ["1", "2", "3"] and result == recorded
    with pytest.raises(ReplayError, match="without meeting record 3/0"):
        _read(ListTransport([_page([1, 2], next_=None)]), replay=recorded)


def test_a_micro_batch_takes_the_answer_holding_its_bound_whole_and_hands_its_iterator_on() -> None:
    """Records that arrived after the plan but came in the same answer are in hand: the batch keeps them, so the
    next batch does not fetch them again (arrivals are sequence x 1 ms here). A batch read (spark.read) cuts."""
    micro_batch = FetchLimits.of_batch(None, None, until_ms=2)
    transport = IteratorTransport([_page([1, 2, 3], next_="i1"), _page([4], next_="i2")])
    rows, read = _handed(None, micro_batch, transport=transport)
    assert rows == ["1", "2", "3"] and read.stop == STOP_BOUND and read.next_iterator == "i1"
    assert len(transport.wanted) == 1  # no call after the answer that met the bound
    # That answer reached the tip: nothing is waiting, and the read's call counts as the shard's probe.
    rows, read = _handed([_tip(_page([1, 2, 3], next_="i1", behind=0))], micro_batch)
    assert rows == ["1", "2", "3"] and read.stop == STOP_CAUGHT_UP and read.next_iterator == "i1"
    # A cap still cuts inside the answer.
    rows, read = _handed([_page([1, 2, 3], next_="i1")], FetchLimits.of_batch(2, None, until_ms=1))
    assert rows == ["1", "2"] and read.stop == STOP_LIMIT
    rows, read = _handed([_page([1, 2, 3], next_="i1")], FetchLimits(stop_after_ms=2))
    assert rows == ["1", "2"] and read.stop == STOP_BOUND


def _called(page: Page, called_ms: int) -> Page:
    page.called_ms = called_ms
    return page


def test_a_read_planned_without_a_bound_takes_what_arrived_by_its_first_call() -> None:
    """``stop_at_first_call`` (a shard the driver did not probe): the first page whole, later pages up to when its
    call started (arrivals are sequence x 1 ms here)."""
    first_call = FetchLimits(stop_at_first_call=True)
    rows, result = _read(ListTransport([_called(_page([1, 2]), 4), _page([3, 4, 5, 6])]), first_call)
    assert rows == ["1", "2", "3", "4"] and result.stop == STOP_BOUND
    # the server's clock ahead of this host's: the first page's records "arrived" after its call, all taken
    rows, result = _read(ListTransport([_called(_page([1, 2, 3]), 2), _page([4, 5])]), first_call)
    assert rows == ["1", "2", "3"] and result.stop == STOP_BOUND
    # a bound planned wins, and without either a read goes on to the tip
    rows, _result = _read(
        ListTransport([_called(_page([1, 2, 3]), 9)]), FetchLimits(stop_after_ms=2, stop_at_first_call=True)
    )
    assert rows == ["1", "2"]
    rows, result = _read(ListTransport([_called(_page([1, 2]), 1), _page([3]), _page([], behind=0)]))
    assert rows == ["1", "2", "3"] and result.stop == STOP_CAUGHT_UP


def test_a_gone_start_goes_on_from_the_oldest_record_and_says_so() -> None:
    transport = ListTransport([_page([7], next_=None)], gone=True)
    shard_range = ShardRange(
        ShardTask("s", "shardId-0", 0, 2**128 - 1, Position(AFTER_SEQUENCE_NUMBER, "5")), FetchLimits(), CONTEXT
    )
    assert [page.sequences for page, _a, _b in shard_range.slices(transport)] == [["7"]]
    assert transport.opened == [Position(AFTER_SEQUENCE_NUMBER, "5"), Position(TRIM_HORIZON)]
    assert shard_range.result is not None
    assert shard_range.result.data_loss == DataLossEvent(Position(AFTER_SEQUENCE_NUMBER, "5"), "position gone")
    assert shard_range.result.start == Position(TRIM_HORIZON)
