"""Driver side: the query's offsets as Spark hands them over, turned into plans (the one home of planning).

Who calls it: ``stream_reader.KinesisStreamReader``, whose Spark calls forward here and nowhere else:
``initialOffset`` -> ``initial``, ``latestOffset`` -> ``latest``, ``partitions`` -> ``batch`` then ``tasks`` and
``consumer_arns``, ``commit`` -> ``committed``, ``reportLatestOffset`` -> ``progress_report``, ``stop`` ->
``release``. ``planner.BatchPlanner`` makes each plan; this class keeps what pyspark's two calling conventions need
between calls: 4.2+ passes ``latestOffset(start, limit)``, 4.0.2 none, before ``initialOffset`` too, so the last
offset planned stands in or a ``PendingOffset`` is answered (docs/source.md, "pyspark 4.0.2").
"""

from __future__ import annotations

import uuid
from typing import Any

from ..fetch.range import ShardTask
from .guards import MissingMetadataError, check_pinned, lost_store_message
from .offsets import KinesisOffset, PendingOffset, parse_offset
from .planner import BatchPlanner
from .settings import SourceSettings


def as_dict(offset: KinesisOffset | PendingOffset) -> dict[str, Any]:
    """An offset as the JSON dict Spark stores (pyspark writes it with ``json.dumps``)."""
    return offset.to_dict()


class QueryOffsets:
    """One query's offsets on the driver (never pickled)."""

    def __init__(self, settings: SourceSettings):
        self.settings = settings
        self.planner = BatchPlanner(settings)
        self.available_now_ms: int | None = None  # Trigger.AvailableNow: read nothing that arrived after it
        self._initial: KinesisOffset | None = None
        self._last: tuple[KinesisOffset, dict[str, Any]] | None = None  # the last batch planned or committed,
        # with the offset as Spark knows it (a pending offset stays pending)
        self._pending: PendingOffset | None = None

    def initial(self) -> KinesisOffset:
        """A new query's first offset; Spark may ask twice, the answer must not change."""
        if self._initial is None:
            self._initial = self.planner.initial(uuid.uuid4().hex, self.settings.metadata_path)
        return self._initial

    def latest(self, start: dict[str, Any] | None, max_rows: int | None) -> dict[str, Any]:
        """The next batch's offset, or ``start`` itself when no shard has records waiting (see the module doc)."""
        if start is not None:
            base, known = self._parsed(start), start
        elif self._last is not None:
            base, known = self._last
        else:
            if self._pending is None:
                self._pending = PendingOffset(uuid.uuid4().hex, self.settings.metadata_path)
            return as_dict(self._pending)
        planned = self.planner.next(base, max_rows, self.available_now_ms)
        return known if planned is None else as_dict(planned)

    def batch(self, start: dict[str, Any], end: dict[str, Any]) -> KinesisOffset:
        """The plan of the batch from ``start`` to ``end`` (also when it runs again after a restart)."""
        offset = parse_offset(end)
        if isinstance(offset, PendingOffset):
            offset = self._resolve_pending(offset, start)
        check_pinned(offset, self.settings.pinned)  # a batch that runs again reads the same rows
        self._remember(offset, end)
        return offset

    def committed(self, end: dict[str, Any]) -> KinesisOffset:
        """Spark finished the batch ending at ``end``."""
        offset = self._parsed(end)  # most often the end ``batch`` just parsed
        self._remember(offset, end)
        return offset

    def tasks(self, offset: KinesisOffset) -> list[ShardTask]:
        """What batch ``offset`` reads: one task per shard (``BatchPlanner.tasks``)."""
        return self.planner.tasks(offset)

    def consumer_arns(self) -> dict[str, str]:
        """``{stream: ARN}`` of the query's enhanced fan-out consumers; {} with GetRecords."""
        return self.planner.consumer_arns()

    def progress_report(self) -> dict[str, Any] | None:
        """Lag and what reads found, for the query progress (``health``)."""
        return self.planner.progress_report()

    def release(self) -> None:
        """The query ends: deregister its enhanced fan-out consumers when the options ask for it."""
        if self.planner.consumers is not None:
            self.planner.consumers.release()

    def _real(self, offset: KinesisOffset | PendingOffset) -> KinesisOffset:
        """``offset`` itself, or a pending offset's recorded resolution."""
        if isinstance(offset, KinesisOffset):
            return offset
        recorded = self.settings.metadata_store(offset.metadata_path).get_document(offset.nonce)
        if recorded is None:
            message = lost_store_message(offset.metadata_path, offset.nonce, "resolution of the pending offset")
            raise MissingMetadataError(message)
        return parse_offset(recorded)  # type: ignore[return-value]

    def _resolve_pending(self, pending: PendingOffset, start: dict[str, Any]) -> KinesisOffset:
        """The batch after ``start``, planned once and recorded under the nonce (the first resolution wins)."""
        store = self.settings.metadata_store(pending.metadata_path)
        recorded = store.get_document(pending.nonce)
        if recorded is None:
            base = self._real(parse_offset(start))
            max_rows = self.settings.max_records_per_trigger
            resolved = self.planner.next(base, max_rows, self.available_now_ms, force=True)
            assert resolved is not None
            # purged with the batch it resolves to: one document per driver start must not pile up
            recorded = store.put_batch_document(resolved.source_id, resolved.batch_id, pending.nonce, as_dict(resolved))
        return parse_offset(recorded)  # type: ignore[return-value]

    def _parsed(self, raw: dict[str, Any]) -> KinesisOffset:
        """``raw`` as an offset: the one remembered when Spark hands that one back (each trigger and commit; parsing
        takes ~10 µs a shard, comparing the dicts under 1), else parsed."""
        if self._last is not None and self._last[1] == raw:
            return self._last[0]
        return self._real(parse_offset(raw))

    def _remember(self, offset: KinesisOffset, raw: dict[str, Any]) -> None:
        if self._last is None or offset.batch_id >= self._last[0].batch_id:
            self._last = (offset, raw)
