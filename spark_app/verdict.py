"""Did country_counts count every event exactly once? The demo's check, independent of Spark and the connector.

What "counted exactly once" means here, precisely. country_counts runs in update mode: each micro-batch
re-emits the (window, country) counts that changed, so the sink stream holds several records per
(window_start, country), and a replayed batch may repeat records. The *final* count of a (window_start,
country) is the one in its record with the latest ``emitted_at`` (the batch time; records of a replayed batch
are identical, so equal times must carry equal counts, else the check fails). The pipeline counted every event
exactly once when, for every (window_start, country):

    final count in the sink == number of well-formed events in the source stream with that country whose
                               ``date`` falls in that window

and no other (window_start, country) appears in the sink. An event counted twice, lost, dropped as late by the
watermark or put in the wrong window breaks the equality. Malformed records are checked separately: the
dead-letter path must hold exactly as many as the source stream has.

The expected side is computed here in plain Python from the records read back from the source stream, with
the same rules as ``spark_app.events`` (so a bug in the Spark parsing shows up as a mismatch).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

EVENT_DATE_FORMAT = "%Y-%m-%d %H:%M:%S"  # the events' `date` and the sink's window_start
Key = tuple[str, str]  # (window_start, country)


def event_key(data: bytes, window_seconds: int) -> Key | None:
    """(window_start, country) of a well-formed seed event, or None for a malformed record.

    Times are read as UTC, as the demo's Spark session does (spark.sql.session.timeZone=UTC).
    """
    try:
        event = json.loads(data.decode("utf-8"))
        when = datetime.strptime(event["date"], EVENT_DATE_FORMAT).replace(tzinfo=UTC)
    except (UnicodeDecodeError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(event, dict) or type(event.get("id")) is not int:
        return None
    country = event.get("data")
    if not isinstance(country, str) or not country.strip():
        return None
    start = int(when.timestamp()) // window_seconds * window_seconds
    return datetime.fromtimestamp(start, UTC).strftime(EVENT_DATE_FORMAT), country.strip()


@dataclass
class Expected:
    """What the source stream holds: well-formed events per (window_start, country), and malformed records."""

    counts: Counter[Key] = field(default_factory=Counter)
    malformed: int = 0

    @classmethod
    def from_records(cls, payloads: Iterable[bytes], window_seconds: int) -> Expected:
        expected = cls()
        for data in payloads:
            key = event_key(data, window_seconds)
            if key is None:
                expected.malformed += 1
            else:
                expected.counts[key] += 1
        return expected

    def per_country(self) -> Counter[str]:
        return _per_country(self.counts)


@dataclass
class FinalCounts:
    """The sink's latest count per (window_start, country); fed record by record as the sink is read."""

    latest: dict[Key, tuple[str, int]] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)
    unreadable: int = 0
    records: int = 0

    def add(self, data: bytes) -> None:
        self.records += 1
        try:
            record = json.loads(data)
            key = (record["window_start"], record["country"])
            emitted, count = record["emitted_at"], int(record["count"])
        except (ValueError, KeyError, TypeError):
            self.unreadable += 1
            return
        # Equal ISO-8601 strings with the same offset compare like the times they name.
        previous = self.latest.get(key)
        if previous is None or emitted > previous[0]:
            self.latest[key] = (emitted, count)
        elif emitted == previous[0] and count != previous[1]:
            self.conflicts.append(f"{key}: {previous[1]} and {count} both emitted at {emitted}")

    def counts(self) -> Counter[Key]:
        return Counter({key: count for key, (_, count) in self.latest.items()})

    def per_country(self) -> Counter[str]:
        return _per_country(self.counts())


def _per_country(counts: Counter[Key]) -> Counter[str]:
    totals: Counter[str] = Counter()
    for (_, country), count in counts.items():
        totals[country] += count
    return totals


@dataclass(frozen=True)
class Verdict:
    ok: bool
    problems: list[str]


def judge(
    expected: Expected, final: FinalCounts, dead_letters: int, generated: int | None, injected_malformed: int
) -> Verdict:
    """Compare everything the demo knows; ``problems`` names each mismatch (empty when ``ok``)."""
    problems: list[str] = []
    if generated is not None:
        sent, in_source = generated + injected_malformed, expected.counts.total() + expected.malformed
        if in_source != sent:
            problems.append(f"source stream holds {in_source} records, but {sent} were sent")
        if expected.malformed != injected_malformed:
            problems.append(
                f"source stream holds {expected.malformed} malformed records, {injected_malformed} injected"
            )
    got = final.counts()
    for key in sorted(set(got) | set(expected.counts)):
        if got.get(key, 0) != expected.counts.get(key, 0):
            problems.append(
                f"window {key[0]} {key[1]}: counted {got.get(key, 0)}, source has {expected.counts.get(key, 0)}"
            )
    problems += [f"conflicting counts for {c}" for c in final.conflicts]
    if final.unreadable:
        problems.append(f"{final.unreadable} sink records are not count records")
    if dead_letters != expected.malformed:
        problems.append(f"dead-letter path holds {dead_letters} records, source has {expected.malformed} malformed")
    return Verdict(not problems, problems)


def user_payloads(records: list[dict]) -> Iterator[bytes]:
    """The user records' data of GetRecords records, de-aggregating KPL aggregates (the sink's default)."""
    from pyspark_aws_kinesis import kpl

    for record in records:
        data = record["Data"]
        if kpl.is_aggregated(data):
            yield from (user.data for user in kpl.deaggregate(data))
        else:
            yield data
