"""Each sample job end to end: kinesalite streams, the aws-kinesis source and sink, the session's Spark."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path

from pyspark_aws_kinesis.compat import HAS_READ_LIMITS
from spark_app import common, country_counts, fan_out, kinesis_to_kinesis, word_count
from spark_app.verdict import Expected, FinalCounts
from tests.spark_app.conftest import JobRunner, dead_letters, event, user_records

COUNTRIES = ("Spain", "Portugal", "Finland", "France")
MALFORMED = [b"not json", b'{"id": 1, "data": "Spain"}']


def events(first: int, count: int, second: int = 0) -> list[bytes]:
    """``count`` seed events from id ``first``, one per second of event time from 08:00:<second>."""
    return [
        event(i, COUNTRIES[i % 4], f"2026-11-22 08:{(second + n) // 60:02d}:{(second + n) % 60:02d}")
        for n, i in enumerate(range(first, first + count))
    ]


def sink_counts(jobs: JobRunner, sink: str) -> FinalCounts:
    final = FinalCounts()
    for data, _ in user_records(jobs.kinesis, sink):
        final.add(data)
    return final


def _last_batch(checkpoint: Path, log: str) -> int:
    return max(int(p.name) for p in (checkpoint / log).iterdir() if p.name.isdigit())


def test_country_counts_stops_on_its_marker_and_resumes_from_its_checkpoint(jobs: JobRunner, lite_stream, tmp_path):
    source, sink = lite_stream(shards=2), lite_stream(shards=1)
    first = events(0, 24) + MALFORMED[:1]
    jobs.put(first, source)
    marker = tmp_path / "stop"
    # An idle trigger runs no batch (no empty micro-batches), so the stop lands in idle time between triggers.
    args = jobs.args(country_counts, source, sink, "--trigger-seconds", "2", "--window-seconds", "10")
    queries = country_counts.start(jobs.spark, args)

    # Once the counts are all in the sink, ask the job to stop the way an operator would: with the marker.
    def stop_when_counted() -> None:
        want = Expected.from_records(first, 10).counts
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (
            sink_counts(jobs, sink).counts() == want and dead_letters(jobs.dead_letter_path)
        ):
            time.sleep(0.5)
        marker.touch()

    threading.Thread(target=stop_when_counted, daemon=True).start()
    stop = common.StopSignal(common.StopMarker(str(marker)), marker_interval_s=0.2)
    assert common.run_until_stopped(queries, stop, poll_s=0.2) == f"stop marker {marker} appeared"
    assert not marker.exists() and not any(q.isActive for q in queries)
    counts_checkpoint = jobs.checkpoint / "counts"
    assert _last_batch(counts_checkpoint, "offsets") == _last_batch(counts_checkpoint, "commits")
    records_before = sink_counts(jobs, sink).records

    # Restart on the same checkpoint after more events (one window shared with the first run, one new).
    second = events(100, 12, second=25) + MALFORMED[1:]
    jobs.put(second, source)
    jobs.run_available_now(country_counts, source, sink, "--window-seconds", "10")

    final = sink_counts(jobs, sink)
    expected = Expected.from_records(first + second, 10)
    assert final.counts() == expected.counts, "every event counted once across the restart"
    assert not final.conflicts and not final.unreadable
    # Only the windows the new events touched were emitted again: nothing from the first run was re-read.
    touched = set(Expected.from_records(second, 10).counts)
    assert final.records - records_before == len(touched)
    letters = dead_letters(jobs.dead_letter_path)
    assert sorted(letter["payload"] for letter in letters) == sorted(m.decode() for m in MALFORMED)
    assert {letter["streamName"] for letter in letters} == {source}


def test_word_count_runs_until_sigterm_and_writes_each_words_running_count(jobs: JobRunner, lite_stream):
    """The job as its main() runs it (``serve``: signal handlers, run until stopped), stopped by SIGTERM."""
    source, sink = lite_stream(shards=2), lite_stream(shards=1)
    jobs.put([b"the quick brown fox", b"The lazy dog and THE fox", b"\xff\xfe not text"], source)
    expected = Counter(["the", "quick", "brown", "fox", "the", "lazy", "dog", "and", "the", "fox"])

    def latest_counts() -> dict[str, int]:
        latest: dict[str, tuple[str, int]] = {}
        for data, key in user_records(jobs.kinesis, sink):
            record = json.loads(data)
            assert key == record["word"]
            if record["word"] not in latest or record["emitted_at"] >= latest[record["word"]][0]:
                latest[record["word"]] = (record["emitted_at"], record["count"])
        return {word: count for word, (_, count) in latest.items()}

    served = threading.Event()

    def sigterm_when_counted() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (latest_counts() == expected and dead_letters(jobs.dead_letter_path)):
            time.sleep(0.5)
        if not served.is_set():  # after serve() the default handler is back: SIGTERM would end pytest
            os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=sigterm_when_counted, daemon=True).start()
    args = jobs.args(word_count, source, sink, "--output", "kinesis", "--trigger-seconds", "2")
    handler = signal.getsignal(signal.SIGTERM)
    try:
        assert common.serve(jobs.spark, args, word_count.start, "word_count", common.StopSignal()) == common.EXIT_OK
    finally:
        served.set()
    assert signal.getsignal(signal.SIGTERM) is handler
    assert not [q for q in jobs.spark.streams.active if q.name.startswith("word_count")]
    assert latest_counts() == expected
    [letter] = dead_letters(jobs.dead_letter_path)
    assert letter["error"] == "payload: not valid UTF-8"


def test_word_count_console_output_reads_every_record(jobs: JobRunner, lite_stream):
    source = lite_stream(shards=1)
    jobs.put([b"hello kinesis hello", b"bye"], source)
    queries = word_count.start(
        jobs.spark, jobs.args(word_count, source, None, "--output", "console", "--available-now")
    )
    for query in queries:
        query.awaitTermination(180)
    console = next(q for q in queries if q.name == "word_count-console")
    assert console.exception() is None
    assert "Console" in console.lastProgress["sink"]["description"]
    assert sum(progress["numInputRows"] for progress in console.recentProgress) == 2


def test_kinesis_to_kinesis_copies_each_good_event_once_under_its_partition_key(jobs: JobRunner, lite_stream):
    source, sink = lite_stream(shards=2), lite_stream(shards=2)
    good = events(0, 15)
    jobs.put(good + MALFORMED, source)
    jobs.run_available_now(kinesis_to_kinesis, source, sink)
    copied = user_records(jobs.kinesis, sink)
    by_id = {json.loads(data)["id"]: (json.loads(data), key) for data, key in copied}
    assert len(copied) == len(by_id) == len(good)
    for i, data in enumerate(good):
        body, key = by_id[json.loads(data)["id"]]
        assert key == f"key-{i % 7}"  # the source record's partition key
        assert (
            body["country_code"] == {"Spain": "ES", "Portugal": "PT", "Finland": "FI", "France": "FR"}[body["country"]]
        )
    assert len(dead_letters(jobs.dead_letter_path)) == len(MALFORMED)


def test_fan_out_writes_each_batch_to_parquet_and_kinesis_and_routes_the_malformed(
    jobs: JobRunner, lite_stream, tmp_path
):
    source, sink = lite_stream(shards=2), lite_stream(shards=1)
    good = events(0, 20)
    jobs.put(good + MALFORMED, source)
    parquet = tmp_path / "parquet"
    jobs.run_available_now(fan_out, source, sink, "--parquet-path", str(parquet))
    table = jobs.spark.read.parquet(str(parquet))
    assert sorted(row.id for row in table.collect()) == list(range(20))
    assert {"batch_id", "country", "event_time", "sequenceNumber", "shardId"} <= set(table.columns)
    assert sorted(data for data, _ in user_records(jobs.kinesis, sink)) == sorted(good)
    assert len(dead_letters(jobs.dead_letter_path)) == len(MALFORMED)
    # The batch was unpersisted after its writes.
    assert not [rdd for rdd in jobs.spark.sparkContext._jsc.getPersistentRDDs().values()]


def test_country_counts_in_append_mode_emits_each_closed_window_once(jobs: JobRunner, lite_stream):
    source, sink = lite_stream(shards=1), lite_stream(shards=1)
    early = events(0, 8)  # 08:00:00-08:00:07, window 08:00:00
    jobs.put([*early, event(99, "Spain", "2026-11-22 08:10:00")], source)
    flags = ("--output-mode", "append", "--window-seconds", "10", "--watermark-seconds", "10")
    jobs.run_available_now(country_counts, source, sink, *flags)
    # The batch that read the events moved the watermark to 08:09:50; windows close in the batch after it.
    # pyspark 4.2+ runs that (data-less) batch before AvailableNow stops, as the source supports AvailableNow;
    # pyspark 4.0.2 runs one batch only, and the windows close in the next run that gets new events.
    closed = sink_counts(jobs, sink)
    if HAS_READ_LIMITS:
        assert closed.counts() == Expected.from_records(early, 10).counts
    else:
        assert closed.records == 0
    jobs.put([event(100, "France", "2026-11-22 08:10:05")], source)
    jobs.run_available_now(country_counts, source, sink, *flags)
    final = sink_counts(jobs, sink)
    assert final.counts() == Expected.from_records(early, 10).counts  # the 08:10 window is still open
    assert final.records == len(final.counts()), "append mode writes each (window, country) once"
