"""Driver side: from where the last micro-batch stopped to the next batch's plan, or no plan when nothing waits.

Who calls it: ``query_offsets.QueryOffsets`` (for the reader's ``initialOffset``, ``latestOffset`` and
``partitions``). It reads records only to complete an unfinished read (below); to plan, it asks three things:

1. the metadata store: where each shard's read in the last batch stopped, and why (``ShardRead.stop``);
2. ``ShardCatalog``: which shards exist now; ``shards.track_listing`` adds children of a reshard (read only once
   their parents are read to their end), forgets finished shards that expired, and reports vanished ones;
3. ``ShardProber``: whether the readable shards whose last read caught up have records waiting.

A batch is planned only when some shard has records waiting, so an idle stream runs no empty micro-batches.
The plan (a ``KinesisOffset``) names the shards to read, their starting positions, their share of
``kinesis.maxRecordsPerTrigger`` and the arrival time after which records wait for a later batch.

A shard of the previous batch with no record was not read to its end (a foreachBatch that skipped the batch, a
``limit``/``show`` that stopped early, a task never run): the planner completes that read itself, under the
executors' range rules minus the time limit, records it first-write-wins and goes on; the batch's unread records
are the job's to skip. What executors found (data lost, KPL sub-records outside the shard's hash range) is
logged here and added to the progress report. When the query started, the driver wrote a source document into
the metadata store (its id, start time and pinned options): executors check they see it (a store they do not
share fails the first batch), and a planner that misses both it and a batch's records knows the store was lost.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from .. import options as opts
from ..aws.clients import kinesis_client, kinesis_reader_client
from ..consumers import QueryConsumers
from ..fetch.iterators import Handoff, PositionGoneError, ShardGoneError, data_loss, freshest
from ..fetch.range import FetchLimits, ShardRange, ShardTask, now_ms
from ..fetch.reads import MORE_WAITING, ShardRead
from ..metadata.store import MetadataStore
from ..options import OptionError
from ..parallel import parallel_map
from ..positions import AT_TIMESTAMP, LATEST, SHARD_END, TRIM_HORIZON, Position, key_label, split_shard_key
from ..shards import Shard
from .catalog import ShardCatalog, track_listing
from .offsets import KinesisOffset, is_readable
from .probe import Found, ProbeResult, ShardProber
from .settings import SourceSettings

log = logging.getLogger(__name__)
INITIAL_BATCH = -1  # the initial offset's batch id: no batch reads it, batch 0 starts at its positions
MIN_PROBE_INTERVAL_S = 0.2  # Kinesis allows 5 GetRecords per second per shard
MAX_LOSS_EVENTS = 20  # data-loss events kept for the progress report


class MissingMetadataError(RuntimeError):
    """The metadata store lost what the query wrote there (deleted, emptied, or another kinesis.metadataPath)."""


class ChangedOptionError(OptionError):
    """An option that decides which rows exist differs from the value the query started with."""


def source_document_name(source_id: str) -> str:
    """The metadata-store document the driver writes when a query starts (see the module doc)."""
    return f"source-{source_id}"


def lost_store_message(metadata_path: str, source_id: str, missing: str) -> str:
    """What to say when the metadata store lost what this query wrote there, and what to do."""
    return (
        f"the metadata store {metadata_path} has no {missing} of source {source_id}, which this query wrote "
        f"there: the store was deleted or emptied, or {opts.METADATA_PATH.name} points elsewhere than when the "
        "query started. Restore the store or point the option back at it; to start over, give the query a new "
        "checkpointLocation"
    )


def check_pinned(offset: KinesisOffset, now: Mapping[str, str]) -> None:
    """Refuse option values that change which rows exist against those the query recorded (old offsets: none)."""
    for name, recorded in sorted((offset.pinned or {}).items()):
        current = now.get(name)
        if current is not None and current != recorded:
            raise ChangedOptionError(
                f"option {name} is {current!r} but this query started with {recorded!r} (recorded in its "
                f"checkpoint): it decides which rows the query reads, so it cannot change while the query lives. "
                f"Set it back to {recorded!r}, or start a new query with a new checkpointLocation"
            )


def fair_shares(keys: list[str], max_rows: int | None, batch_id: int) -> tuple[dict[str, int], list[str]]:
    """Split ``max_rows`` evenly over ``keys`` (sorted); returns (cap per shard, shards to read).

    The remainder (or, with fewer rows than shards, the rows themselves) goes to shards in an order that rotates
    with the batch id, so no shard is always the one left short.
    """
    if max_rows is None or not keys:
        return {}, keys
    turn = batch_id % len(keys)
    rotated = keys[turn:] + keys[:turn]
    share, extra = divmod(max_rows, len(keys))
    caps = {key: share + (1 if index < extra else 0) for index, key in enumerate(rotated)}
    chosen = {key: cap for key, cap in caps.items() if cap > 0}
    return chosen, sorted(chosen)


class BatchPlanner:
    """Plans micro-batches for one query; lives on the driver for the query's lifetime (never pickled)."""

    def __init__(self, settings: SourceSettings):
        self.settings = settings
        client_factory = functools.partial(kinesis_client, settings.client)
        self.catalog = ShardCatalog(client_factory, settings.client.retry, settings.describe_shard_interval_s)
        probe_interval = max(settings.fetch_interval_s, MIN_PROBE_INTERVAL_S)
        self.prober = ShardProber(
            client_factory,
            settings.client.retry,
            probe_interval,
            settings.probe_threads,
            settings.max_probes_per_trigger,
        )
        self.lag: dict[str, int] = {}  # millisBehindLatest per shard, from the last read or probe
        self._reported_vanished: set[str] = set()  # warned once, not on every idle trigger
        self.dropped_out_of_range = 0  # KPL sub-records outside their shard's range, since this driver started
        self.loss_events: list[dict[str, Any]] = []  # the last MAX_LOSS_EVENTS data losses executors found
        self._ends: tuple[tuple[str, int], dict[str, Position], set[str]] | None = None
        self.handoffs: dict[str, Handoff] = {}  # the iterators the last reads ended with (ShardRead.next_iterator)
        efo = settings.efo
        self.consumers = (
            None
            if efo is None
            else QueryConsumers(settings.client, settings.streams, efo.consumer_name, efo.require_deregistration)
        )

    def consumer_arns(self) -> dict[str, str]:
        """``{stream: ARN}`` of the query's enhanced fan-out consumers, made ACTIVE on first use; {} with
        GetRecords. Planning itself never spends the consumers: it probes with GetRecords (``probe``), one
        Limit=1 call per caught-up shard per probe interval at most."""
        return {} if self.consumers is None else self.consumers.arns()

    # --- the first offset -------------------------------------------------------------------------------------

    def initial(self, source_id: str, metadata_path: str) -> KinesisOffset:
        """Every shard listed now at its starting position (``LATEST`` = the arrival time of now); writes the
        source document."""
        self.consumer_arns()  # a new query registers (or reuses) its consumers before anything else
        now = now_ms()
        positions: dict[str, Position] = {}
        parents: dict[str, tuple[str, ...]] = {}
        for stream in self.settings.streams:
            listing = self.catalog.shards(stream, fresh=True)
            track_listing(positions, parents, stream, listing, functools.partial(self._starting, stream, now))
        pinned = self.settings.pinned
        document = {"sourceId": source_id, "createdMs": now, "pinned": pinned}
        self.settings.metadata_store(metadata_path).put_document(source_document_name(source_id), document)
        return KinesisOffset(
            source_id, metadata_path, INITIAL_BATCH, positions, parents, source_document=True, pinned=pinned
        )

    def _starting(self, stream: str, now: int, shard: Shard) -> Position:
        position = self.settings.starting.for_shard(stream, shard.shard_id)
        if position.kind != LATEST:
            return position
        # A LATEST iterator cannot be replayed; the arrival time it stands for can. A closed shard takes no
        # new records, so LATEST finds it finished.
        return Position(AT_TIMESTAMP, timestamp_ms=now) if shard.is_open else Position(SHARD_END)

    # --- a planned batch's shards ----------------------------------------------------------------------------

    def tasks(self, offset: KinesisOffset) -> list[ShardTask]:
        """What batch ``offset`` reads: one task per shard, with its hash range, start and record cap."""
        tasks = []
        for key, position in offset.active().items():
            stream, shard_id = split_shard_key(key)
            low, high = self.catalog.hash_range(stream, shard_id)
            handoff = self._handoff(key, position)
            tasks.append(ShardTask(stream, shard_id, low, high, position, offset.max_records.get(key), handoff))
        return tasks

    def _handoff(self, key: str, position: Position) -> Handoff | None:
        """The freshest iterator known at ``position`` (the shard's last read or probe), so that the read starts
        with GetRecords; None after a restart, or when none points exactly there."""
        return freshest(position, self.prober.handoff(key, position), self.handoffs.get(key))

    # --- the next offset --------------------------------------------------------------------------------------

    def next(
        self, base: KinesisOffset, max_rows: int | None = None, bound_ms: int | None = None, force: bool = False
    ) -> KinesisOffset | None:
        """Batch ``base.batch_id + 1``, or None when no shard has records waiting (unless ``force``).

        ``max_rows``: cap on the batch's records; ``bound_ms``: read nothing that arrived after it (AvailableNow).
        """
        check_pinned(base, self.settings.pinned)
        positions, waiting = self._after(base)
        parents = dict(base.parents)
        self._track(positions, parents)
        with_data, arrivals = self._find_waiting(positions, parents, waiting, bound_ms)
        if not with_data and not force:
            return None
        batch_id = base.batch_id + 1
        caps, reads = fair_shares(sorted(with_data), max_rows, batch_id)
        until = bound_ms if bound_ms is not None else max([now_ms(), *arrivals])
        offset = KinesisOffset(
            base.source_id,
            base.metadata_path,
            batch_id,
            positions,
            parents,
            frozenset(reads),
            caps,
            until,
            base.source_document,
            base.pinned if base.pinned is not None else self.settings.pinned,
        )
        self._log_plan(offset)
        return offset

    def _after(self, base: KinesisOffset) -> tuple[dict[str, Position], set[str]]:
        """Where each shard continues after batch ``base``, and which shards are known to have more records."""
        if base.batch_id == INITIAL_BATCH:
            return dict(base.shards), set()
        batch = (base.source_id, base.batch_id)
        if self._ends is None or self._ends[0] != batch:  # records never change once written: read them once
            self._ends = (batch, *self._read_ends(base))
        return dict(self._ends[1]), set(self._ends[2])

    def _read_ends(self, base: KinesisOffset) -> tuple[dict[str, Position], set[str]]:
        store = self.settings.metadata_store(base.metadata_path)
        keys = list(base.active())
        reads = store.get_shard_reads(base.source_id, base.batch_id, [split_shard_key(key) for key in keys])
        unread = [key for key in keys if reads[split_shard_key(key)] is None]
        if unread:
            completed = self.complete_reads(base, store, unread)
            reads.update({split_shard_key(key): read for key, read in completed.items()})
        positions, waiting = dict(base.shards), set()
        for key in keys:
            read = reads[split_shard_key(key)]
            assert read is not None
            positions[key] = read.next_start()
            if read.next_iterator is not None and read.iterator_ms is not None:
                self.handoffs[key] = Handoff(positions[key], read.next_iterator, read.iterator_ms)
            if read.stop in MORE_WAITING:
                waiting.add(key)
            if read.millis_behind_latest is not None:
                self.lag[key] = read.millis_behind_latest
            self._note_findings(base.batch_id, key, read)
        return positions, waiting

    def complete_reads(self, base: KinesisOffset, store: MetadataStore, keys: list[str]) -> dict[str, ShardRead]:
        """Finish batch ``base``'s reads of ``keys`` that no executor finished (in parallel), as an executor
        would have, without the time limit; first write wins, so a record that appears meanwhile is kept."""
        if base.source_document and store.get_document(source_document_name(base.source_id)) is None:
            raise MissingMetadataError(lost_store_message(base.metadata_path, base.source_id, "source document"))
        reads = parallel_map(lambda key: self._complete_read(base, store, key), keys)
        return dict(zip(keys, reads, strict=True))

    def _complete_read(self, base: KinesisOffset, store: MetadataStore, key: str) -> ShardRead:
        (task,) = self.tasks(replace(base, reads=frozenset({key})))
        limits = FetchLimits(self.settings.max_fetch_records, None, base.until_ms)
        shard_range = ShardRange(
            task, limits, self.settings.shard_context(task), fail_on_data_loss=self.settings.fail_on_data_loss
        )
        arn = self.consumer_arns().get(task.stream)
        transport = self.settings.transport(kinesis_reader_client(self.settings.client), task, arn)
        skipped = sum(stop - start for _page, start, stop in shard_range.slices(transport))
        assert shard_range.result is not None
        stored = store.put_shard_read(base.source_id, base.batch_id, shard_range.result)
        log.warning(
            "aws-kinesis batch %d did not read %s to its end (the job skipped the batch, stopped reading early, or "
            "a task never ran): the driver completed the read; the batch's %d records there were not seen by the "
            "job, and the next batch starts after them at %s",
            base.batch_id,
            key_label(key),
            skipped,
            stored.next_start().to_json(),
        )
        return stored

    def _note_findings(self, batch_id: int, key: str, read: ShardRead) -> None:
        """Log and count what the read found that the query should know about (executors only log locally)."""
        if read.dropped_out_of_range:
            self.dropped_out_of_range += read.dropped_out_of_range
            log.warning(
                "aws-kinesis batch %d dropped %d KPL sub-records on %s whose hash key is outside the shard's range "
                "(an aggregate written across a reshard; the KPL sends them again to the right shard)",
                batch_id,
                read.dropped_out_of_range,
                key_label(key),
            )
        if read.data_loss is not None:
            event = {"batchId": batch_id, "shard": key, "kind": read.data_loss.kind}
            event["position"] = read.data_loss.position.to_json()
            self.loss_events = [*self.loss_events, event][-MAX_LOSS_EVENTS:]
            log.warning(
                "aws-kinesis batch %d lost data on %s: %s at %s (kinesis.failOnDataLoss is false, the query went on)",
                batch_id,
                key_label(key),
                read.data_loss.kind,
                read.data_loss.position.to_json(),
            )

    def _track(self, positions: dict[str, Position], parents: dict[str, tuple[str, ...]]) -> None:
        """Fold the current listings in; an unfinished shard that vanished is lost data."""
        for stream in self.settings.streams:
            listing = self.catalog.shards(stream)
            vanished = track_listing(positions, parents, stream, listing, lambda _shard: Position(TRIM_HORIZON))
            for key, position in vanished.items():
                if key in self._reported_vanished:
                    continue
                gone = ShardGoneError("ListShards no longer shows it")
                data_loss(key_label(key), position, gone, self.settings.fail_on_data_loss, "the other shards")
                self._reported_vanished.add(key)
        self.prober.forget(set(positions))
        self.handoffs = {key: handoff for key, handoff in self.handoffs.items() if key in positions}
        self.lag = {key: lag for key, lag in self.lag.items() if key in positions}

    def _find_waiting(
        self,
        positions: dict[str, Position],
        parents: Mapping[str, tuple[str, ...]],
        waiting: set[str],
        bound_ms: int | None,
    ) -> tuple[set[str], list[int]]:
        """The readable shards with records waiting, and the arrival times the probes saw.

        Shards whose last read stopped at a record cap have more (no probe, unless AvailableNow's bound needs
        the next record's arrival time). Probes that find a shard's end mark it finished, which can make its
        children readable: those are probed in turn. The prober asks at most ``kinesis.maxProbesPerTrigger``
        shards per call; shards it did not answer wait for a later trigger, except under AvailableNow while
        nothing was found (an empty plan there ends the query, so every shard must have been asked).
        """
        with_data: set[str] = set()
        arrivals: list[int] = []
        answered: set[str] = set()
        while True:
            readable = [key for key in sorted(positions) if is_readable(key, positions, parents)]
            known = {key for key in readable if key in waiting and bound_ms is None}
            with_data |= known
            to_probe = {key: positions[key] for key in readable if key not in known and key not in answered}
            if not to_probe:
                return with_data, arrivals
            results = self.prober.probe(to_probe, bound_ms, self.handoffs)
            answered |= set(results)
            finished_some = False
            for key, result in results.items():
                finished_some |= self._apply(key, result, positions, with_data, arrivals)
            unanswered = len(results) < len(to_probe)
            if not finished_some and not (unanswered and bound_ms is not None and not with_data):
                return with_data, arrivals

    def _apply(
        self, key: str, result: ProbeResult, positions: dict[str, Position], with_data: set[str], arrivals: list[int]
    ) -> bool:
        """Fold one probe result into the plan; True when it finished the shard."""
        if result.millis_behind_latest is not None:
            self.lag[key] = result.millis_behind_latest
        fail = self.settings.fail_on_data_loss
        if result.found is Found.DATA:
            with_data.add(key)
            if result.arrival_ms is not None:
                arrivals.append(result.arrival_ms)
        elif result.found is Found.POSITION_GONE:
            data_loss(key_label(key), positions[key], PositionGoneError(result.error), fail, "the oldest record there")
            positions[key] = Position(TRIM_HORIZON)
            with_data.add(key)
        elif result.found in (Found.SHARD_END, Found.SHARD_GONE):
            if result.found is Found.SHARD_GONE:
                data_loss(key_label(key), positions[key], ShardGoneError(result.error), fail, "its children")
            positions[key] = Position(SHARD_END)
            return True
        return False

    # --- lag --------------------------------------------------------------------------------------------------

    def lag_report(self) -> dict[str, Any] | None:
        """millisBehindLatest per shard and the maximum, for the query progress and the log."""
        if not self.lag:
            return None
        worst = max(sorted(self.lag), key=lambda key: self.lag[key])
        return {
            "maxMillisBehindLatest": self.lag[worst],
            "maxBehindShard": worst,
            "millisBehindLatest": dict(sorted(self.lag.items())),
        }

    def progress_report(self) -> dict[str, Any] | None:
        """The lag report plus what reads found since this driver started: ``recordsDroppedOutOfRange`` (KPL
        sub-records outside their shard's hash range) and ``dataLossEvents`` (the last few, with shard and
        position). pyspark 4.2+ shows it as the source's ``latestOffset`` in the query progress."""
        report = dict(self.lag_report() or {})
        if self.dropped_out_of_range:
            report["recordsDroppedOutOfRange"] = self.dropped_out_of_range
        if self.loss_events:
            report["dataLossEvents"] = list(self.loss_events)
        return report or None

    def _log_plan(self, offset: KinesisOffset) -> None:
        report = self.lag_report()
        behind = f"{report['maxMillisBehindLatest']} ms on {report['maxBehindShard']}" if report else "unknown"
        log.info(
            "aws-kinesis batch %d reads %d of %d readable shards (%d tracked); max millisBehindLatest %s",
            offset.batch_id,
            len(offset.active()),
            len(offset.readable()),
            len(offset.shards),
            behind,
        )
