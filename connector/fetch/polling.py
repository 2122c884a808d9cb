"""The GetRecords transport: one shard's records as decoded Pages, through GetShardIterator + GetRecords.

Who calls it: the source's ``read()`` (executors), the batch reader, and the planner when it completes an unread
shard (driver). It implements ``fetch.range.ShardTransport``: the range rules (``fetch.range.ShardRange``) decide
which rows count and when to stop; this module only talks to Kinesis: it opens an iterator at a position, sizes
each call's ``Limit`` to what the range still wants, pauses ``fetch_interval_s`` between calls (Kinesis allows 5
GetRecords per second per shard), decodes the raw answer body (``decode.decode_get_records``, the fast path), and
re-opens after the last record it delivered when an iterator expires. A read handed an iterator at its start
(``ShardTask.handoff``: the shard's last read or probe ended there) starts with GetRecords; if Kinesis refuses it,
it opens a new one at the same position.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from connector.aws import RAW_BODY
from connector.decode import Page, ShardContext, decode_get_records
from connector.fetch.iterators import Handoff, open_iterator, refused_iterator
from connector.offsets import AFTER_SEQUENCE_NUMBER, WHOLE_RECORD, Position, shard_label
from connector.retry import RetryPolicy, error_code


@dataclass(frozen=True)
class PollingSettings:
    """How the GetRecords transport asks: records per call (``Limit``) and the pause between calls."""

    records_per_call: int = 10000
    fetch_interval_s: float = 0.2


class GetRecordsTransport:
    """``ShardTransport`` over GetRecords for one shard (``kinesis``: a raw-body reader client, see connector.aws)."""

    hands_off_iterators = True  # Page.next_iterator is a GetRecords iterator (fetch.range.ShardTransport)

    def __init__(
        self,
        kinesis: Any,
        context: ShardContext,
        retry: RetryPolicy,
        settings: PollingSettings = PollingSettings(),
        handoff: Handoff | None = None,
    ):
        self.kinesis = kinesis
        self.context = context
        self.retry = retry
        self.settings = settings
        self.handoff = handoff  # an iterator someone already holds, used when a read starts at its position
        self._what = shard_label(context.stream_name, context.shard_id)

    def pages(self, start: Position, wanted: Callable[[], int | None]) -> Iterator[Page]:
        """Pages from ``start`` until a page without NextShardIterator (the shard's end)."""
        position = start
        handoff = self.handoff if self.handoff is not None and self.handoff.usable_for(start) else None
        handed = handoff is not None
        iterator = handoff.iterator if handoff is not None else self._open(position)
        first = True
        while True:
            if not first and self.settings.fetch_interval_s:
                time.sleep(self.settings.fetch_interval_s)
            first = False
            page = self._get_records(iterator, wanted(), handed)
            handed = False
            if page is None:  # the iterator expired or was refused: a new one after the last record delivered
                iterator = self._open(position)
                continue
            yield page
            if page.next_iterator is None:
                return
            if page.last_sequence is not None:
                position = Position(AFTER_SEQUENCE_NUMBER, page.last_sequence, WHOLE_RECORD)
            iterator = page.next_iterator

    def _open(self, position: Position) -> str:
        return open_iterator(
            self.kinesis, self.context.stream_name, self.context.shard_id, position, self.retry, self._what
        )

    def _get_records(self, iterator: str, wanted: int | None, handed: bool = False) -> Page | None:
        """One GetRecords answer, decoded; None when the iterator expired (or, ``handed``, was refused)."""
        limit = self.settings.records_per_call if wanted is None else min(self.settings.records_per_call, wanted)
        try:
            answer = self.retry.call(
                self.kinesis.get_records, ShardIterator=iterator, Limit=limit, what=f"GetRecords on {self._what}"
            )
        except ClientError as exc:
            if error_code(exc) == "ExpiredIteratorException" or (handed and refused_iterator(exc)):
                return None
            raise
        page = decode_get_records(answer[RAW_BODY], self.context)
        # "MillisBehindLatest 0: caught up, no new records at this moment" (the GetRecords reference); a full
        # page may have more behind it on servers that always answer 0 (kinesalite).
        page.at_tip = not page.millis_behind_latest and page.kinesis_records < limit
        return page
