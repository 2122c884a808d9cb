"""Completing the reads a batch left unfinished, on the driver, before the next batch is planned from them.

A shard of the previous batch with no record was not read to its end: a foreachBatch that skipped the batch, a
``limit``/``show`` that stopped early, a task that never ran. The next batch starts where that read stops, so the
driver completes it itself, under the executors' range rules minus the time limit (``fetch.range``), records it
first-write-wins and goes on; the batch's unread records are the job's to skip, and a warning says how many.
Who calls it: ``planner.BatchPlanner`` when the previous batch's records miss some of its shards.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from ..fetch.range import FetchLimits, ShardTask
from ..fetch.reads import ShardRead
from ..metadata.store import MetadataStore
from ..parallel import parallel_map
from ..positions import shard_key, shard_label
from .guards import MissingMetadataError, lost_store_message, source_document_name
from .offsets import KinesisOffset
from .settings import SourceSettings

log = logging.getLogger(__name__)


def complete_reads(
    settings: SourceSettings,
    base: KinesisOffset,
    store: MetadataStore,
    tasks: list[ShardTask],
    consumer_arns: Mapping[str, str],
) -> dict[str, ShardRead]:
    """Finish batch ``base``'s reads of ``tasks`` that no executor finished (in parallel), as an executor would
    have, without the time limit; first write wins, so a record that appears meanwhile is kept. Returns the
    stored record of each task, by shard key. ``consumer_arns``: the query's enhanced fan-out consumers."""
    if base.source_document and store.get_document(source_document_name(base.source_id)) is None:
        raise MissingMetadataError(lost_store_message(base.metadata_path, base.source_id, "source document"))
    reads = parallel_map(lambda task: _complete(settings, base, store, task, consumer_arns.get(task.stream)), tasks)
    return {shard_key(task.stream, task.shard_id): read for task, read in zip(tasks, reads, strict=True)}


def _complete(
    settings: SourceSettings, base: KinesisOffset, store: MetadataStore, task: ShardTask, arn: str | None
) -> ShardRead:
    # Not the whole answer at the bound: this read comes a trigger late, and the records that arrived meanwhile
    # would be skipped with the batch instead of starting the next one.
    limits = FetchLimits.of_batch(settings.max_fetch_records, None, base.until_ms, whole_answer=False)
    shard_range, transport = settings.shard_reader(task, limits, arn)
    skipped = sum(stop - start for _page, start, stop in shard_range.slices(transport))
    assert shard_range.result is not None
    stored = store.put_shard_read(base.source_id, base.batch_id, shard_range.result)
    log.warning(
        "aws-kinesis batch %d did not read %s to its end (the job skipped the batch, stopped reading early, or "
        "a task never ran): the driver completed the read; the batch's %d records there were not seen by the "
        "job, and the next batch starts after them at %s",
        base.batch_id,
        shard_label(task.stream, task.shard_id),
        skipped,
        stored.next_start().to_json(),
    )
    return stored
