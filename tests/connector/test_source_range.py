"""The range rules on their own, over a transport that is not GetRecords: the ``ShardTransport`` seam an
enhanced fan-out transport plugs into. Pages are built in memory, so these tests need no server."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from pyspark_aws_kinesis.fetch.decode import Page, ShardContext
from pyspark_aws_kinesis.fetch.iterators import PositionGoneError
from pyspark_aws_kinesis.fetch.range import FetchLimits, ReplayError, ShardRange, ShardTask
from pyspark_aws_kinesis.fetch.reads import (
    STOP_BOUND,
    STOP_CAUGHT_UP,
    STOP_LIMIT,
    STOP_SHARD_END,
    DataLossEvent,
    ShardRead,
)
from pyspark_aws_kinesis.positions import AFTER_SEQUENCE_NUMBER, TRIM_HORIZON, WHOLE_RECORD, Position

CONTEXT = ShardContext("s", "shardId-0", 0, 2**128 - 1)


def _page(sequences: list[int], next_: str | None = "more", behind: int = 1000) -> Page:
    count = len(sequences)
    return Page(
        data=[f"d{n}".encode() for n in sequences],
        keys=["k"] * count,
        sequences=[str(n) for n in sequences],
        subs=[0] * count,
        arrivals_us=[n * 1000 for n in sequences],
        record_ends=[True] * count,
        kinesis_records=count,
        last_sequence=str(sequences[-1]) if sequences else None,
        next_iterator=next_,
        millis_behind_latest=behind,
    )


class ListTransport:
    """Pages from a list; a start other than TRIM_HORIZON can be made to be gone."""

    def __init__(self, pages: list[Page], gone: bool = False):
        self.pages_ = pages
        self.gone = gone
        self.opened: list[Position] = []
        self.wanted: list[int | None] = []

    def pages(self, start: Position, wanted: Callable[[], int | None]) -> Iterator[Page]:
        self.opened.append(start)
        if self.gone and start.kind != TRIM_HORIZON:
            raise PositionGoneError("trimmed")
        for page in self.pages_:
            self.wanted.append(wanted())
            yield page


def _read(transport: ListTransport, limits: FetchLimits | None = None, **kwargs) -> tuple[list[str], ShardRead]:
    shard_range = ShardRange(
        ShardTask("s", "shardId-0", 0, 2**128 - 1, Position(TRIM_HORIZON)), limits or FetchLimits(), CONTEXT, **kwargs
    )
    rows = [seq for page, start, stop in shard_range.slices(transport) for seq in page.sequences[start:stop]]
    assert shard_range.result is not None
    return rows, shard_range.result


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
