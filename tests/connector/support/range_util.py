"""Helpers for the range rules' tests: a transport that serves pages from a list, pages of made-up sequence numbers,
and one range read over them."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from pyspark_aws_kinesis.fetch.decode import Page, ShardContext
from pyspark_aws_kinesis.fetch.iterators import PositionGoneError
from pyspark_aws_kinesis.fetch.range import FetchLimits, ShardRange, ShardTask
from pyspark_aws_kinesis.fetch.reads import ShardRead
from pyspark_aws_kinesis.positions import TRIM_HORIZON, Position

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
