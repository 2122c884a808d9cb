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

Besides the rows, every GetRecords call is logged with the moment the proxy decided on it (``LoggedCall``): AWS
counts a shard's calls over a sliding second, which per-second rows cannot show. ``report.most_in_a_second(...)``
counts a client's calls in every sliding second of the log; over HTTP the log comes with ``calls=True``.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from localaws.quota_model import Clock

STATS_PATH = "/__quota_stats"
OTHER = "other"
COUNTERS = ("calls", "refused", "records", "refused_records", "bytes")
KEYS = ("second", "client", "action", "stream", "shard", "consumer")
LOGGED_ACTIONS = frozenset({"GetRecords"})  # AWS's tightest per-shard call quota (5 a second)


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


@dataclass(frozen=True)
class LoggedCall:
    at_s: float  # when the proxy decided on it, seconds since the proxy started
    client: str
    action: str
    stream: str
    shard: str
    refused: bool
    nbytes: int = 0  # the answer's bytes (GetRecords)


def sliding_windows(ordered: Sequence[float], span_s: float = 1.0) -> Iterator[tuple[int, int]]:
    """For each of the sorted ``ordered`` times, ``(start, end)``: the slice ``ordered[start:end]`` of those that
    count with it, as AWS counts a shard's calls (one at u counts for one at t while t - u < span_s)."""
    start = 0
    for end, at in enumerate(ordered):
        while ordered[start] <= at - span_s:
            start += 1
        yield start, end + 1


def most_in_a_second(times: Iterable[float], span_s: float = 1.0) -> int:
    """The most of ``times`` in any sliding ``span_s`` (``sliding_windows``)."""
    return max((end - start for start, end in sliding_windows(sorted(times), span_s)), default=0)


class QuotaStats:
    """The proxy's live counters (thread-safe); ``report()`` takes a snapshot."""

    def __init__(self, clock: Clock, quotas: Mapping[str, Any]):
        self.clock, self.quotas = clock, dict(quotas)
        self.started = clock.now()
        self.started_epoch_s = time.time()
        self._rows: dict[tuple, Tally] = {}
        self._calls: list[LoggedCall] = []
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
        decided_at: float | None = None,
    ) -> None:
        """Add to the row of this second; a call of ``LOGGED_ACTIONS`` is also logged at ``decided_at`` (the
        clock's time of the proxy's decision)."""
        second = int(self.clock.now() - self.started)
        key = (second, client, action, stream, shard, consumer)
        with self._lock:
            if decided_at is not None and action in LOGGED_ACTIONS:
                at_s = decided_at - self.started
                self._calls.append(LoggedCall(at_s, client, action, stream, shard, refused > 0, nbytes))
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
            calls = list(self._calls)
        report = QuotaReport(rows, self.started_epoch_s, self.clock.now() - self.started, self.quotas, calls)
        return report.grouped(groups) if groups else report


class QuotaReport:
    """A snapshot of the counts, to filter and sum: ``report.tally(client="neighbour", action="GetRecords")``.

    Filters: ``client`` is a substring of the User-Agent (or a group label, after ``grouped``); ``action`` a name
    or a collection of names; ``stream`` and ``shard`` exact. ``started_epoch_s`` (wall clock) lets a benchmark
    line the seconds up with its own events.
    """

    def __init__(
        self,
        rows: list[Row],
        started_epoch_s: float,
        elapsed_s: float,
        quotas: Mapping[str, Any],
        calls: list[LoggedCall] | None = None,
    ):
        self.rows, self.started_epoch_s, self.elapsed_s, self.quotas = rows, started_epoch_s, elapsed_s, quotas
        self.calls = calls or []  # the logged calls (``LOGGED_ACTIONS``), in the order they were decided

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

    def most_in_a_second(self, client: str, stream: str | None = None, action: str = "GetRecords") -> dict[str, int]:
        """Per shard, the most calls of ``client`` (a User-Agent substring or group label) in any sliding second of
        the call log, refused ones included (needs the log: ``fetch(..., calls=True)`` over HTTP)."""
        times: dict[str, list[float]] = {}
        for call in self.calls:
            if client in call.client and call.action == action and stream in (None, call.stream):
                times.setdefault(call.shard, []).append(call.at_s)
        return {shard: most_in_a_second(at) for shard, at in sorted(times.items())}

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
        calls = [dataclasses.replace(call, client=label(call.client)) for call in self.calls]
        return QuotaReport(rows, self.started_epoch_s, self.elapsed_s, self.quotas, calls)

    def to_json(self, with_calls: bool = False) -> dict[str, Any]:
        """The report as JSON; the call log only ``with_calls`` (a long run logs many)."""
        return {
            "started_epoch_s": self.started_epoch_s,
            "elapsed_s": self.elapsed_s,
            "quotas": self.quotas,
            "rows": [{**{k: getattr(row, k) for k in KEYS}, **row.tally.as_dict()} for row in self.rows],
            **({"calls": [dataclasses.astuple(call) for call in self.calls]} if with_calls else {}),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> QuotaReport:
        rows = [Row(*(item[k] for k in KEYS), tally=Tally.from_dict(item)) for item in doc["rows"]]
        calls = [LoggedCall(*item) for item in doc.get("calls", [])]
        return cls(rows, doc["started_epoch_s"], doc["elapsed_s"], doc["quotas"], calls)

    @classmethod
    def fetch(
        cls, proxy_url: str, groups: Mapping[str, str] | None = None, timeout_s: float = 10, calls: bool = False
    ) -> QuotaReport:
        """The report of the quota proxy at ``proxy_url`` (its endpoint URL), read over HTTP; with the call log if
        ``calls``."""
        pairs = [("group", f"{name}={token}") for name, token in (groups or {}).items()]
        query = urllib.parse.urlencode(pairs + ([("calls", "1")] if calls else []))
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
