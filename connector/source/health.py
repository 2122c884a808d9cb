"""The query's health as the driver sees it: lag per shard, what reads found (data lost, KPL sub-records dropped
outside their shard's hash range, vanished shards), and the calls Kinesis refused for a shard's read quota.

Who calls it: ``planner.BatchPlanner`` as it plans, the one writer: the previous batch's reads (``read``, from
their ``fetch.reads.ShardRead``) and probes (``probed``) come in, a shard leaves with ``forget``. The stream reader's
``reportLatestOffset`` returns ``progress_report()`` (pyspark 4.2+), and the planner's log line for each batch names
the worst lag (``lag_report``): docs/source.md, "Lag and what reads found".
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

from ..fetch.iterators import ShardGoneError, data_loss
from ..fetch.reads import ShardRead
from ..positions import Position, key_label

log = logging.getLogger(__name__)
MAX_LOSS_EVENTS = 20  # data-loss events kept for the progress report


class QueryHealth:
    """One query's lag and findings, on the driver, since this driver started (never pickled)."""

    def __init__(self, fail_on_data_loss: bool):
        self.fail_on_data_loss = fail_on_data_loss
        self._lag: dict[str, int] = {}  # millisBehindLatest per shard, from the last read or probe
        self._reported_vanished: set[str] = set()  # warned once, not on every idle trigger
        self.dropped_out_of_range = 0  # KPL sub-records outside their shard's range
        self.loss_events: list[dict[str, Any]] = []  # the last MAX_LOSS_EVENTS data losses (driver or executors)
        self.loss_count = 0  # every data loss since this driver started (loss_events keeps the last few)
        self.refused: dict[str, int] = {}  # shard key -> GetRecords calls (reads and probes) refused for a quota
        self.refused_total = 0  # the same, all shards, also those no longer tracked

    def read(self, batch_id: int, key: str, read: ShardRead) -> None:
        """Batch ``batch_id``'s read of shard ``key``: its lag, and what it found (logged and counted)."""
        if read.millis_behind_latest is not None:
            self._lag[key] = read.millis_behind_latest
        if read.dropped_out_of_range:
            self.dropped_out_of_range += read.dropped_out_of_range
            log.warning(
                "aws-kinesis batch %d dropped %d KPL sub-records on %s whose hash key is outside the shard's range "
                "(an aggregate written across a reshard; the KPL sends them again to the right shard)",
                batch_id,
                read.dropped_out_of_range,
                key_label(key),
            )
        if read.refused_calls:
            self._count_refused(key, read.refused_calls)
            log.warning(
                "aws-kinesis batch %d: Kinesis refused %d GetRecords calls of the read of %s for the shard's read "
                "quota (5 calls and 2 MiB per second, shared by every application reading it); the read waited "
                "longer and asked for fewer records each time (%d refused on this shard since the driver started)",
                batch_id,
                read.refused_calls,
                key_label(key),
                self.refused[key],
            )
        if read.data_loss is not None:
            self.lost(batch_id, key, read.data_loss.position, read.data_loss.kind)
            log.warning(
                "aws-kinesis batch %d lost data on %s: %s at %s (kinesis.failOnDataLoss is false, the query went on)",
                batch_id,
                key_label(key),
                read.data_loss.kind,
                read.data_loss.position.to_json(),
            )

    def lost(self, batch_id: int, key: str, position: Position, kind: str) -> None:
        """Shard ``key``'s records from ``position`` on are lost (``kind``: "position gone", "shard gone"), found
        by the driver planning batch ``batch_id`` or by that batch's executor; counted for the progress report."""
        event = {"batchId": batch_id, "shard": key, "kind": kind, "position": position.to_json()}
        self.loss_events = [*self.loss_events, event][-MAX_LOSS_EVENTS:]
        self.loss_count += 1

    def probed(self, key: str, millis_behind_latest: int | None) -> None:
        """A probe's answer for shard ``key``."""
        if millis_behind_latest is not None:
            self._lag[key] = millis_behind_latest

    def probes_refused(self, refused: dict[str, int]) -> None:
        """Probes Kinesis refused for a quota, per shard key (the prober probes those shards less often)."""
        for key, count in sorted(refused.items()):
            self._count_refused(key, count)
        if refused:
            log.warning(
                "aws-kinesis: Kinesis refused the driver's probe of %s for the shard's read quota (shared by every "
                "application reading it); probing those shards less often until a probe gets through",
                ", ".join(key_label(key) for key in sorted(refused)),
            )

    def _count_refused(self, key: str, count: int) -> None:
        self.refused[key] = self.refused.get(key, 0) + count
        self.refused_total += count

    def vanished(self, batch_id: int, key: str, position: Position) -> None:
        """ListShards no longer shows shard ``key``, not read to its end (found planning batch ``batch_id``): lost
        data, said and counted once (fails the query with ``kinesis.failOnDataLoss``)."""
        if key in self._reported_vanished:
            return
        gone = ShardGoneError("ListShards no longer shows it")
        data_loss(key_label(key), position, gone, self.fail_on_data_loss, "the other shards")
        self.lost(batch_id, key, position, "shard gone")
        self._reported_vanished.add(key)

    def forget(self, tracked: Collection[str], unfinished: Collection[str]) -> None:
        """Keep the refusals and vanished warnings of the shards still ``tracked`` only, and the lag of the
        ``unfinished`` ones: a shard read to its end has nothing left to be behind on, and its last lag would
        otherwise stay in the report (and its maximum) until ListShards stops showing it (the retention)."""
        self._lag = {key: lag for key, lag in self._lag.items() if key in unfinished}
        self.refused = {key: count for key, count in self.refused.items() if key in tracked}
        self._reported_vanished = {key for key in self._reported_vanished if key in tracked}

    def lag_report(self) -> dict[str, Any] | None:
        """millisBehindLatest per shard and the maximum, for the query progress and the log."""
        if not self._lag:
            return None
        worst = max(sorted(self._lag), key=lambda key: self._lag[key])
        return {
            "maxMillisBehindLatest": self._lag[worst],
            "maxBehindShard": worst,
            "millisBehindLatest": dict(sorted(self._lag.items())),
        }

    def progress_report(self) -> dict[str, Any] | None:
        """The lag report plus what reads found since this driver started: ``recordsDroppedOutOfRange`` (KPL
        sub-records outside their shard's hash range), ``dataLossEvents`` (the last few, with shard and
        position), ``dataLossCount`` (all of them), ``refusedCalls`` (GetRecords calls of reads and probes Kinesis
        refused for a shard's read quota since this driver started, with ``refusedCallsPerShard``: the shards still
        tracked)."""
        report = dict(self.lag_report() or {})
        if self.refused_total:
            report["refusedCalls"] = self.refused_total
            report["refusedCallsPerShard"] = dict(sorted(self.refused.items()))
        if self.dropped_out_of_range:
            report["recordsDroppedOutOfRange"] = self.dropped_out_of_range
        if self.loss_events:
            report["dataLossEvents"] = list(self.loss_events)
            report["dataLossCount"] = self.loss_count
        return report or None
