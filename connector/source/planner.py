"""Driver side: from where the last micro-batch stopped to the next batch's plan, or no plan when nothing waits.

Who calls it: ``query_offsets.QueryOffsets`` (for the reader's ``initialOffset``, ``latestOffset`` and
``partitions``). To plan, it asks the metadata store where each shard's last read stopped and why (completing an
unfinished one through ``completion``), ``catalog`` which shards exist now (children read once their parents are
read to their end), and ``probe`` whether the shards whose last read caught up have records waiting (a steady shard
is planned without asking). The plan, a ``KinesisOffset``, goes to Spark; what reads and probes say goes to
``health``, and ``guards`` keeps the store and the pinned options the query's: docs/source.md, "How a micro-batch
is planned and read".
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..aws.clients import kinesis_client, kinesis_reader_client
from ..clock import now_ms
from ..consumers import QueryConsumers
from ..fetch.iterators import Handoff, PositionGoneError, ShardGoneError, data_loss, freshest
from ..fetch.range import ShardTask
from ..fetch.reads import MORE_WAITING, STOP_CAUGHT_UP
from ..positions import AT_TIMESTAMP, LATEST, SHARD_END, TRIM_HORIZON, Position, key_label, split_shard_key
from ..shards import Shard
from .catalog import ShardCatalog, track_listing
from .completion import complete_reads
from .guards import check_pinned, source_document_name
from .health import QueryHealth
from .offsets import INITIAL_BATCH, KinesisOffset, is_readable
from .probe import HELD_BYTES_PER_SHARD, ShardProber
from .probe_answers import Found, ProbeResult
from .settings import SourceSettings

log = logging.getLogger(__name__)
UNANSWERED_PAUSE_S = 0.1  # AvailableNow waiting for shards whose probes were refused: how often to look again


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
        self.prober = ShardProber(
            functools.partial(kinesis_reader_client, settings.client),
            settings.client.retry,
            settings.probe_interval_s,
            settings.probe_threads,
            settings.max_probes_per_trigger,
            # With enhanced fan-out the probes are the query's only calls on the shared GetRecords quota: a busy
            # shard is asked no more often than an idle one, and a subscription takes no page.
            busy_interval_s=settings.fetch_interval_s if settings.efo is None else None,
            held_bytes=0 if settings.efo is not None else HELD_BYTES_PER_SHARD,
            max_limit=settings.records_per_fetch,
        )
        self.health = QueryHealth(settings.fail_on_data_loss)  # lag and what reads found: written only there
        self._ends: tuple[tuple[str, int], dict[str, Position], set[str]] | None = None
        self.handoffs: dict[str, Handoff] = {}  # the iterators the last reads ended with (ShardRead.next_iterator)
        self._last_calls: dict[str, int] = {}  # when the last batch's reads made their last GetRecords (wall ms)
        # The batch last planned, and its shards read without a probe first: no call before when (wall ms)
        self._not_before: tuple[int, dict[str, int]] = (INITIAL_BATCH, {})
        efo = settings.efo
        self.consumers = (
            None
            if efo is None
            else QueryConsumers(settings.client, settings.streams, efo.consumer_name, efo.require_deregistration)
        )

    def consumer_arns(self) -> dict[str, str]:
        """``{stream: ARN}`` of the query's enhanced fan-out consumers, made ACTIVE on first use; {} with
        GetRecords. Planning itself never spends the consumers: it probes with GetRecords (``probe``), one
        call per caught-up shard per probe interval at most (a busy shard's, up to 4 a second: ``probe``)."""
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
            calls = [call for call in (self._last_calls.get(key), self.prober.last_call_ms(key)) if call is not None]
            last_call = max(calls, default=None)  # the shard's last read's or last probe's, whichever came later
            cap = offset.max_records.get(key)
            held = self.prober.held(key, position)  # the probe's answer: the read's first page
            not_before = self._not_before[1].get(key) if self._not_before[0] == offset.batch_id else None
            if not_before is None:  # the task cannot see the shard's second; its first call waits for room in it
                not_before = self.prober.room_from_ms(key)
            tasks.append(ShardTask(stream, shard_id, low, high, position, cap, handoff, last_call, held, not_before))
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
        batch_id = base.batch_id + 1
        self._track(positions, parents, batch_id)
        self._not_before = (batch_id, {})
        with_data, arrivals = self._find_waiting(positions, parents, waiting, bound_ms, batch_id)
        if not with_data and not force:
            return None
        caps, reads = fair_shares(sorted(with_data), max_rows, batch_id)
        until = self._arrival_bound(bound_ms, arrivals)
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

    def _arrival_bound(self, bound_ms: int | None, arrivals: list[int]) -> int | None:
        """The planned batch's ``until_ms``: AvailableNow's bound; none when it reads a steady shard without a probe
        (each read takes what arrived by its first call); else now, or the latest arrival a probe saw if later."""
        if bound_ms is not None:
            return bound_ms
        if self._not_before[1]:
            return None
        return max([now_ms(), *arrivals])

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
            tasks = self.tasks(replace(base, reads=frozenset(unread)))
            completed = complete_reads(self.settings, base, store, tasks, self.consumer_arns())
            reads.update({split_shard_key(key): read for key, read in completed.items()})
        positions, waiting = dict(base.shards), set()
        self._last_calls = {}
        for key in keys:
            read = reads[split_shard_key(key)]
            assert read is not None
            positions[key] = read.next_start()
            if read.next_iterator is not None and read.iterator_ms is not None:
                self.handoffs[key] = Handoff(positions[key], read.next_iterator, read.iterator_ms)
                if read.stop == STOP_CAUGHT_UP:  # the read's last call said "nothing more": it counts as a probe
                    self.prober.observed(key, positions[key], self.handoffs[key])
            self.prober.read_ended(key, positions[key], took_records=read.records > 0)
            if read.stop in MORE_WAITING:
                waiting.add(key)
            if read.last_call_ms is not None:  # the next read's first call keeps the fetch interval after it
                self._last_calls[key] = read.last_call_ms
            for called_ms in read.call_starts_ms:  # and the read's calls count in the shard's second
                self.prober.read_called(key, called_ms)
            if read.paid_ms is not None:  # and its answers' bytes are paid back before the shard is asked again
                self.prober.read_paid(key, read.paid_ms)
            self.health.read(base.batch_id, key, read)
        return positions, waiting

    def _track(self, positions: dict[str, Position], parents: dict[str, tuple[str, ...]], batch_id: int) -> None:
        """Fold the current listings in (planning batch ``batch_id``); an unfinished shard that vanished is lost
        data. A shard read to its end is never probed or read again: the prober, the handed-on iterators and the lag
        report forget it at once (a probe's held answer is up to 64 KiB), not once ListShards stops showing it (the
        retention)."""
        gone: set[str] = set()
        for stream in self.settings.streams:
            listing = self.catalog.shards(stream)
            vanished = track_listing(positions, parents, stream, listing, lambda _shard: Position(TRIM_HORIZON))
            for key, position in vanished.items():
                self.health.vanished(batch_id, key, position)
            gone |= vanished.keys()
        unfinished = {key for key, position in positions.items() if not position.is_shard_end}
        self.prober.forget(unfinished)
        self.handoffs = {key: handoff for key, handoff in self.handoffs.items() if key in unfinished}
        # A vanished shard stays said until a batch is planned past it: the triggers before plan from the
        # committed offset, which still holds it.
        self.health.forget(positions.keys() | gone, unfinished)

    def _find_waiting(
        self,
        positions: dict[str, Position],
        parents: Mapping[str, tuple[str, ...]],
        waiting: set[str],
        bound_ms: int | None,
        batch_id: int,
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
            with_data |= known  # planned at once: the read itself keeps the interval after the last call
            to_probe = {key: positions[key] for key in readable if key not in known and key not in answered}
            if bound_ms is None:  # busy shards: the batch's read asks them (``ShardProber.deferred``)
                deferred = self.prober.deferred(to_probe, self.handoffs)
                self._not_before[1].update(deferred)
                with_data |= set(deferred)
                answered |= set(deferred)
                to_probe = {key: position for key, position in to_probe.items() if key not in deferred}
            if not to_probe:
                return with_data, arrivals
            results = self.prober.probe(to_probe, bound_ms, self.handoffs)
            self.health.probes_refused(self.prober.take_refused())
            answered |= set(results)
            finished_some = False
            for key, result in results.items():
                finished_some |= self._apply(key, result, positions, with_data, arrivals, batch_id)
            unanswered = len(results) < len(to_probe)
            if not finished_some and not (unanswered and bound_ms is not None and not with_data):
                return with_data, arrivals
            if not results:  # every probe refused or backing off: wait for their backoff, not in a tight loop
                time.sleep(UNANSWERED_PAUSE_S)

    def _apply(
        self,
        key: str,
        result: ProbeResult,
        positions: dict[str, Position],
        with_data: set[str],
        arrivals: list[int],
        batch_id: int,
    ) -> bool:
        """Fold one probe result into the plan (for batch ``batch_id``); True when it finished the shard."""
        self.health.probed(key, result.millis_behind_latest)
        fail = self.settings.fail_on_data_loss
        if result.found is Found.DATA:
            with_data.add(key)
            if result.arrival_ms is not None:
                arrivals.append(result.arrival_ms)
        elif result.found is Found.POSITION_GONE:
            data_loss(key_label(key), positions[key], PositionGoneError(result.error), fail, "the oldest record there")
            self.health.lost(batch_id, key, positions[key], "position gone")
            positions[key] = Position(TRIM_HORIZON)
            with_data.add(key)
        elif result.found in (Found.SHARD_END, Found.SHARD_GONE):
            if result.found is Found.SHARD_GONE:
                data_loss(key_label(key), positions[key], ShardGoneError(result.error), fail, "its children")
                self.health.lost(batch_id, key, positions[key], "shard gone")
            positions[key] = Position(SHARD_END)
            return True
        return False

    # --- reporting ----------------------------------------------------------------------------------------------

    def progress_report(self) -> dict[str, Any] | None:
        """Lag and what reads found (``health.QueryHealth.progress_report``), for the query progress."""
        return self.health.progress_report()

    def _log_plan(self, offset: KinesisOffset) -> None:
        if not log.isEnabledFor(logging.INFO):  # the lag report walks every shard
            return
        report = self.health.lag_report()
        behind = f"{report['maxMillisBehindLatest']} ms on {report['maxBehindShard']}" if report else "unknown"
        log.info(
            "aws-kinesis batch %d reads %d of %d readable shards (%d tracked); max millisBehindLatest %s",
            offset.batch_id,
            len(offset.active()),
            len(offset.readable()),
            len(offset.shards),
            behind,
        )
