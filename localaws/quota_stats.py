"""What the quota proxy counted: calls, refusals, records and bytes per client, action, stream, shard and second.

``QuotaStats`` is the live counter the proxy writes to. ``QuotaReport`` is a snapshot to read: from Python
(``proxy.report()``) or from another process over HTTP (``QuotaReport.fetch(proxy_url)``, which reads
``GET /__quota_stats`` on the proxy's own port). Both have the same shape: one row per second, client (the full
User-Agent), action, stream, shard and consumer, so the totals are sums of rows and the per-second rows are the
time series a benchmark plots. ``groups={"ours": "<token>", "neighbour": "<token>"}`` relabels each client by
the first label whose substring its User-Agent holds ("other" if none).

Counters of a row (``Tally``):
- ``calls``: requests (a PutRecords call counts once for each shard it had entries for; SubscribeToShard counts
  its calls, its pushed events are ``records``/``bytes`` with no call);
- ``refused``: requests answered with a quota error, by reason in ``refusals`` (``calls``, ``bytes``,
  ``records``, ``in_use``, ``creating``: see ``localaws.quota_model``);
- ``records`` / ``bytes``: records and record bytes moved (GetRecords answers, events pushed, entries written);
- ``refused_records``: PutRecords entries (and PutRecord calls) refused for the shard's write quota.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from localaws.quota_model import Clock

STATS_PATH = "/__quota_stats"
OTHER = "other"
COUNTERS = ("calls", "refused", "records", "refused_records", "bytes")
KEYS = ("second", "client", "action", "stream", "shard", "consumer")


@dataclass
class Tally:
    calls: int = 0
    refused: int = 0
    records: int = 0
    refused_records: int = 0
    bytes: int = 0
    refusals: Counter[str] = field(default_factory=Counter)

    def add(self, other: Tally) -> None:
        for name in COUNTERS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.refusals.update(other.refusals)

    @property
    def refused_share(self) -> float:
        """Refused calls / calls (0 without calls)."""
        return self.refused / self.calls if self.calls else 0.0

    @property
    def refused_record_share(self) -> float:
        """Refused entries / entries offered, for writes (0 without any)."""
        offered = self.records + self.refused_records
        return self.refused_records / offered if offered else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**{name: getattr(self, name) for name in COUNTERS}, "refusals": dict(self.refusals)}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Tally:
        return cls(**{name: doc.get(name, 0) for name in COUNTERS}, refusals=Counter(doc.get("refusals", {})))


@dataclass(frozen=True)
class Row:
    second: int  # whole seconds since the proxy started
    client: str
    action: str
    stream: str
    shard: str
    consumer: str
    tally: Tally

    def matches(self, client: str | None, actions: Collection[str] | None, stream: str | None, shard: str | None):
        return (
            (client is None or client in self.client)
            and (actions is None or self.action in actions)
            and (stream is None or self.stream == stream)
            and (shard is None or self.shard == shard)
        )


class QuotaStats:
    """The proxy's live counters (thread-safe); ``report()`` takes a snapshot."""

    def __init__(self, clock: Clock, quotas: Mapping[str, Any]):
        self.clock, self.quotas = clock, dict(quotas)
        self.started = clock.now()
        self.started_epoch_s = time.time()
        self._rows: dict[tuple, Tally] = {}
        self._lock = threading.Lock()

    def count(
        self,
        client: str,
        action: str,
        stream: str = "",
        shard: str = "",
        consumer: str = "",
        *,
        calls: int = 0,
        refused: int = 0,
        reason: str | None = None,
        records: int = 0,
        refused_records: int = 0,
        nbytes: int = 0,
    ) -> None:
        second = int(self.clock.now() - self.started)
        key = (second, client, action, stream, shard, consumer)
        with self._lock:
            tally = self._rows.get(key)
            if tally is None:
                tally = self._rows[key] = Tally()
            tally.calls += calls
            tally.refused += refused
            tally.records += records
            tally.refused_records += refused_records
            tally.bytes += nbytes
            if reason is not None:
                tally.refusals[reason] += max(refused, refused_records)

    def report(self, groups: Mapping[str, str] | None = None) -> QuotaReport:
        with self._lock:
            rows = [Row(*key, tally=Tally.from_dict(tally.as_dict())) for key, tally in self._rows.items()]
        report = QuotaReport(rows, self.started_epoch_s, self.clock.now() - self.started, self.quotas)
        return report.grouped(groups) if groups else report


class QuotaReport:
    """A snapshot of the counts, to filter and sum: ``report.tally(client="neighbour", action="GetRecords")``.

    Filters: ``client`` is a substring of the User-Agent (or a group label, after ``grouped``); ``action`` a name
    or a collection of names; ``stream`` and ``shard`` exact. ``started_epoch_s`` (wall clock) lets a benchmark
    line the seconds up with its own events.
    """

    def __init__(self, rows: list[Row], started_epoch_s: float, elapsed_s: float, quotas: Mapping[str, Any]):
        self.rows, self.started_epoch_s, self.elapsed_s, self.quotas = rows, started_epoch_s, elapsed_s, quotas

    def select(
        self,
        client: str | None = None,
        action: str | Collection[str] | None = None,
        stream: str | None = None,
        shard: str | None = None,
    ) -> list[Row]:
        actions = {action} if isinstance(action, str) else action
        return [row for row in self.rows if row.matches(client, actions, stream, shard)]

    def tally(self, **filters: Any) -> Tally:
        """The sum of the rows that match (see the class for the filters)."""
        return _sum(row.tally for row in self.select(**filters))

    def by(self, key: str, **filters: Any) -> dict[str, Tally]:
        """Sums per value of one key (``client``, ``action``, ``stream``, ``shard``, ``consumer``)."""
        sums: dict[str, Tally] = {}
        for row in self.select(**filters):
            sums.setdefault(getattr(row, key), Tally()).add(row.tally)
        return dict(sorted(sums.items()))

    def per_second(self, **filters: Any) -> list[Tally]:
        """The time series: one Tally per second since the proxy started, up to the last second counted."""
        rows = self.select(**filters)
        series = [Tally() for _ in range(max((row.second for row in rows), default=-1) + 1)]
        for row in rows:
            series[row.second].add(row.tally)
        return series

    def clients(self) -> list[str]:
        return sorted({row.client for row in self.rows})

    def grouped(self, groups: Mapping[str, str]) -> QuotaReport:
        """The same counts with each client relabeled by the first group whose substring its User-Agent holds."""

        def label(client: str) -> str:
            return next((name for name, token in groups.items() if token in client), OTHER)

        merged: dict[tuple, Tally] = {}
        for row in self.rows:
            key = (row.second, label(row.client), row.action, row.stream, row.shard, row.consumer)
            merged.setdefault(key, Tally()).add(row.tally)
        rows = [Row(*key, tally=tally) for key, tally in merged.items()]
        return QuotaReport(rows, self.started_epoch_s, self.elapsed_s, self.quotas)

    def to_json(self) -> dict[str, Any]:
        return {
            "started_epoch_s": self.started_epoch_s,
            "elapsed_s": self.elapsed_s,
            "quotas": self.quotas,
            "rows": [{**{k: getattr(row, k) for k in KEYS}, **row.tally.as_dict()} for row in self.rows],
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> QuotaReport:
        rows = [Row(*(item[k] for k in KEYS), tally=Tally.from_dict(item)) for item in doc["rows"]]
        return cls(rows, doc["started_epoch_s"], doc["elapsed_s"], doc["quotas"])

    @classmethod
    def fetch(cls, proxy_url: str, groups: Mapping[str, str] | None = None, timeout_s: float = 10) -> QuotaReport:
        """The report of the quota proxy at ``proxy_url`` (its endpoint URL), read over HTTP."""
        query = urllib.parse.urlencode([("group", f"{name}={token}") for name, token in (groups or {}).items()])
        with urllib.request.urlopen(f"{proxy_url}{STATS_PATH}?{query}", timeout=timeout_s) as answer:
            return cls.from_json(json.load(answer))

    def summary(self, key: str = "client") -> str:
        """A few lines for a person: per action and ``key`` (``client``, ``stream``, ``shard``), calls, refusals,
        records and bytes."""
        lines = [f"quota proxy, {self.elapsed_s:.0f} s: calls, refusals (% of calls), records, MB"]
        for action, values in _nest(self.rows, key).items():
            for value, tally in values.items():
                refused = f"{tally.refused:,} refused ({tally.refused_share:.1%})"
                if tally.refused_records:
                    refused += f", {tally.refused_records:,} entries refused ({tally.refused_record_share:.1%})"
                name = value if len(value) <= 40 else "..." + value[-37:]
                lines.append(
                    f"  {action:<24} {name:<40} {tally.calls:>8,} calls, {refused}, "
                    f"{tally.records:,} records, {tally.bytes / 1e6:,.1f} MB"
                )
        return "\n".join(lines)


def parse_groups(values: Iterable[str]) -> dict[str, str]:
    """``["label=substring", ...]`` (the HTTP query's ``group`` values) as a mapping, in order."""
    groups: dict[str, str] = {}
    for value in values:
        name, sep, token = value.partition("=")
        if not sep or not name or not token:
            raise ValueError(f"group: got {value!r}; allowed: label=substring")
        groups[name] = token
    return groups


def assert_refused_at_most(
    report: QuotaReport,
    share: float,
    client: str,
    action: str | Collection[str] = ("GetRecords",),
    entries: bool = False,
    **filters: Any,
) -> Tally:
    """Assert that ``client`` (a User-Agent substring or group label) had at most ``share`` (0.01 = 1 %) of its
    calls of ``action`` refused (of its written entries, with ``entries=True``); the message lists each shard.
    Returns the client's Tally. E.g. ``assert_refused_at_most(proxy.report(), 0.01, client="neighbour")``."""
    tally = report.tally(client=client, action=action, **filters)
    got = tally.refused_record_share if entries else tally.refused_share
    if got > share:
        shards = report.by("shard", client=client, action=action, **filters)
        detail = "; ".join(
            f"{shard or '-'}: {t.refused}/{t.calls} calls, {t.refused_records} entries" for shard, t in shards.items()
        )
        what = "written entries" if entries else "calls"
        raise AssertionError(
            f"{client!r} had {got:.2%} of its {what} of {action} refused, more than {share:.2%} ({detail})"
        )
    return tally


def _sum(tallies: Iterable[Tally]) -> Tally:
    total = Tally()
    for tally in tallies:
        total.add(tally)
    return total


def _nest(rows: list[Row], key: str) -> dict[str, dict[str, Tally]]:
    nested: dict[str, dict[str, Tally]] = {}
    for row in rows:
        nested.setdefault(row.action, {}).setdefault(getattr(row, key) or "-", Tally()).add(row.tally)
    return {action: dict(sorted(values.items())) for action, values in sorted(nested.items())}
