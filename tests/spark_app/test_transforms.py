"""The jobs' DataFrame logic on small static tables: parsing, malformed-record reasons, counts, enrichment."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from spark_app.country_counts import count_per_country, to_sink_records
from spark_app.events import decode_text, good, malformed, parse_events
from spark_app.kinesis_to_kinesis import enrich
from spark_app.word_count import count_words

GOOD = b'{"id": 7, "data": "Spain", "date": "2026-11-22 08:05:03"}'
MALFORMED = {
    b"\xff\xfe": "payload: not valid UTF-8",
    b"nope": "payload: not a JSON object",
    b"[1, 2]": "payload: not a JSON object",
    b"": "payload: not a JSON object",
    b'{"id": "x", "data": "Spain", "date": "2026-11-22 08:05:03"}': "id: missing or not an integer",
    b'{"id": 1.5, "data": "Spain", "date": "2026-11-22 08:05:03"}': "id: missing or not an integer",
    b'{"id": 2, "data": "  ", "date": "2026-11-22 08:05:03"}': "data: missing or blank country",
    b'{"id": 2, "date": "2026-11-22 08:05:03"}': "data: missing or blank country",
    b'{"id": 2, "data": "Spain", "date": "yesterday"}': "date: missing or not 'yyyy-MM-dd HH:mm:ss'",
}


def records(spark, payloads: list[bytes]):
    rows = [(data, f"key-{i}", str(i)) for i, data in enumerate(payloads)]
    return spark.createDataFrame(rows, "data binary, partitionKey string, sequenceNumber string")


def event(i: int, country: str, date: str) -> bytes:
    return json.dumps({"id": i, "data": country, "date": date}).encode()


def test_parse_events_reads_a_good_event_and_keeps_the_source_columns(spark):
    [row] = parse_events(records(spark, [GOOD])).collect()
    assert (row.id, row.country, row.event_time, row.error) == (7, "Spain", datetime(2026, 11, 22, 8, 5, 3), None)
    assert (row.payload, row.partitionKey, row.data) == (GOOD.decode(), "key-0", GOOD)


def test_parse_events_names_the_problem_of_each_malformed_record_and_drops_none(spark):
    parsed = parse_events(records(spark, [GOOD, *MALFORMED]))
    assert parsed.count() == 1 + len(MALFORMED)
    reasons = {bytes(row.data): row.error for row in malformed(parsed).collect()}
    assert reasons == MALFORMED
    assert [row.id for row in good(parsed).collect()] == [7]


def test_parse_events_accepts_a_string_data_column(spark):
    df = spark.createDataFrame([(GOOD.decode(),), ("oops",)], "data string")
    assert [row.error for row in parse_events(df).collect()] == [None, "payload: not a JSON object"]


def test_count_per_country_counts_good_events_per_window_and_country(spark):
    payloads = [
        event(1, "Spain", "2026-11-22 08:00:01"),
        event(2, "Spain", "2026-11-22 08:00:09"),
        event(3, "France", "2026-11-22 08:00:05"),
        event(4, "Spain", "2026-11-22 08:00:10"),  # the next 10 s window
        b"garbage",
    ]
    counts = count_per_country(parse_events(records(spark, payloads)), window_seconds=10, watermark_seconds=30)
    got = {(r.window.start.strftime("%H:%M:%S"), r.country): r["count"] for r in counts.collect()}
    assert got == {("08:00:00", "Spain"): 2, ("08:00:00", "France"): 1, ("08:00:10", "Spain"): 1}


def test_to_sink_records_writes_one_json_count_keyed_by_country(spark):
    payloads = [event(1, "Finland", "2026-11-22 08:00:01"), event(2, "Finland", "2026-11-22 08:00:02")]
    counts = count_per_country(parse_events(records(spark, payloads)), window_seconds=60, watermark_seconds=60)
    [row] = to_sink_records(counts).collect()
    body = json.loads(row.data)
    assert row.partitionKey == "Finland"
    assert {k: body[k] for k in ("window_start", "window_end", "country", "count")} == {
        "window_start": "2026-11-22 08:00:00",
        "window_end": "2026-11-22 08:01:00",
        "country": "Finland",
        "count": 2,
    }
    assert datetime.fromisoformat(body["emitted_at"]).tzinfo is not None


def test_count_words_splits_on_non_word_characters_and_lowercases(spark):
    payloads = [b"The cat, the HAT!", b"don't  stop", b"\xff not utf-8"]
    got = {r.word: r["count"] for r in count_words(records(spark, payloads)).collect()}
    assert got == {"the": 2, "cat": 1, "hat": 1, "don't": 1, "stop": 1}


def test_decode_text_marks_only_invalid_utf8(spark):
    rows = decode_text(records(spark, ["é ok".encode(), b"\xc3\x28"])).collect()
    assert [(r.payload, r.error) for r in rows] == [("é ok", None), (None, "payload: not valid UTF-8")]


def test_enrich_keeps_the_source_partition_key_and_adds_the_country_code(spark):
    payloads = [event(1, "Portugal", "2026-11-22 08:00:01"), event(2, "Atlantis", "2026-11-22 08:00:02"), b"x"]
    rows = enrich(parse_events(records(spark, payloads))).collect()
    assert [r.partitionKey for r in rows] == ["key-0", "key-1"]
    bodies = [json.loads(r.data) for r in rows]
    assert [(b["id"], b["country"], b.get("country_code")) for b in bodies] == [
        (1, "Portugal", "PT"),
        (2, "Atlantis", None),
    ]
    assert bodies[0]["event_time"] == "2026-11-22T08:00:01"
    assert bodies[0]["source_sequence_number"] == "0"


@pytest.mark.parametrize("column_type", ["binary", "string"])
def test_parse_events_keeps_every_row_for_both_data_types(spark, column_type):
    data = [(p if column_type == "binary" else p.decode("utf-8", "replace"),) for p in (GOOD, b"{}", b"1")]
    parsed = parse_events(spark.createDataFrame(data, f"data {column_type}"))
    assert good(parsed).count() + malformed(parsed).count() == 3
