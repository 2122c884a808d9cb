"""The demo's exactly-once check, on hand-made source and sink records (no Spark, no servers)."""

from __future__ import annotations

import json

from spark_app.verdict import Expected, FinalCounts, event_key, judge


def event(country: str, date: str, i: int = 1) -> bytes:
    return json.dumps({"id": i, "data": country, "date": date}).encode()


def count(window_start: str, country: str, n: int, emitted_at: str) -> bytes:
    return json.dumps({"window_start": window_start, "country": country, "count": n, "emitted_at": emitted_at}).encode()


SOURCE = [
    event("Spain", "2026-11-22 08:00:01"),
    event("Spain", "2026-11-22 08:00:09"),
    event("France", "2026-11-22 08:00:12"),
    b"not json",
]


def test_event_key_puts_events_in_epoch_aligned_windows_and_rejects_what_spark_rejects():
    assert event_key(event("Spain", "2026-11-22 08:00:09"), 10) == ("2026-11-22 08:00:00", "Spain")
    assert event_key(event(" Spain ", "2026-11-22 08:00:10"), 10) == ("2026-11-22 08:00:10", "Spain")
    for bad in (
        b"\xff",
        b"[1]",
        b'{"id": "1", "data": "Spain", "date": "2026-11-22 08:00:09"}',
        b'{"id": true, "data": "Spain", "date": "2026-11-22 08:00:09"}',
        b'{"id": 1, "data": " ", "date": "2026-11-22 08:00:09"}',
        b'{"id": 1, "data": "Spain", "date": "22/11/2026"}',
    ):
        assert event_key(bad, 10) is None, bad


def test_the_latest_update_of_each_window_is_its_final_count_and_replays_are_harmless():
    final = FinalCounts()
    for record in (
        count("2026-11-22 08:00:00", "Spain", 1, "2026-11-22T08:00:02.000Z"),
        count("2026-11-22 08:00:00", "Spain", 2, "2026-11-22T08:00:10.000Z"),
        count("2026-11-22 08:00:00", "Spain", 2, "2026-11-22T08:00:10.000Z"),  # a replayed batch
        count("2026-11-22 08:00:10", "France", 1, "2026-11-22T08:00:14.000Z"),
    ):
        final.add(record)
    expected = Expected.from_records(SOURCE, 10)
    assert expected.malformed == 1
    verdict = judge(expected, final, dead_letters=1, generated=3, injected_malformed=1)
    assert verdict.ok, verdict.problems
    assert final.per_country() == {"Spain": 2, "France": 1}


def test_a_lost_a_doubled_and_a_misplaced_event_each_fail_the_verdict():
    expected = Expected.from_records(SOURCE, 10)
    final = FinalCounts()
    final.add(count("2026-11-22 08:00:00", "Spain", 3, "2026-11-22T08:00:10.000Z"))  # one counted twice
    final.add(count("2026-11-22 08:00:00", "France", 1, "2026-11-22T08:00:14.000Z"))  # wrong window; 08:00:10 lost
    verdict = judge(expected, final, dead_letters=1, generated=3, injected_malformed=1)
    assert not verdict.ok
    assert verdict.problems == [
        "window 2026-11-22 08:00:00 France: counted 1, source has 0",
        "window 2026-11-22 08:00:00 Spain: counted 3, source has 2",
        "window 2026-11-22 08:00:10 France: counted 0, source has 1",
    ]


def test_conflicting_counts_at_the_same_batch_time_missing_dead_letters_and_lost_sends_are_reported():
    final = FinalCounts()
    final.add(count("2026-11-22 08:00:00", "Spain", 2, "2026-11-22T08:00:10.000Z"))
    final.add(count("2026-11-22 08:00:00", "Spain", 5, "2026-11-22T08:00:10.000Z"))
    final.add(b"garbage")
    final.add(count("2026-11-22 08:00:10", "France", 1, "2026-11-22T08:00:14.000Z"))
    problems = judge(Expected.from_records(SOURCE, 10), final, dead_letters=0, generated=4, injected_malformed=1)
    assert problems.problems == [
        "source stream holds 4 records, but 5 were sent",
        "conflicting counts for ('2026-11-22 08:00:00', 'Spain'): 2 and 5 both emitted at 2026-11-22T08:00:10.000Z",
        "1 sink records are not count records",
        "dead-letter path holds 0 records, source has 1 malformed",
    ]
