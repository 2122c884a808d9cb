"""foreachBatch patterns that leave a batch (or part of one) unread keep the query running (issue 11 item 1).

Each test runs the same query three times from one checkpoint (each run is a restart) with
``Trigger.AvailableNow`` and no row limit, after sending one round of records: so run ``r`` is exactly batch
``r`` and holds exactly round ``r``'s records. That makes "every record delivered exactly once by the batches
the job processes" precise:

- the job's handler ran for every batch 0..2 and the query never failed (before the fix, the plan after a
  batch not read to its end fails with MissingMetadataError, and so does every restart);
- what a processed batch delivered belongs to that batch's round, and no record was delivered twice;
- skip (``if batch_id % 2: return``): even batches deliver their whole round, odd batches nothing, and their
  records never show up later (they were the job's to skip: the next batch starts after them);
- ``isEmpty`` / ``show`` before processing: every round delivered whole, once (these pass before the fix too:
  the processing reads every partition to its end after the partial read);
- ``show()`` alone on odd batches (a read stopped after 20 rows): like skip;
- ``limit(n)``: each batch delivers ``n`` of its round's records, and the rest of the round never later.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.connector.support.source_util import FORMAT, source_options
from tests.reliability.keyed_records import KeyedProducer, duplicates, ids

ROUNDS = 3  # an odd batch between two even ones: enough for every skip below to show
PER_ROUND = 60  # 30 per shard: more than show()/isEmpty()/limit() read, so their reads stop early
LIMIT = 5

Handler = Callable[..., None]


def run_rounds(spark, kinesalite, lite_stream, tmp_path, handle: Handler) -> tuple[list[set[str]], dict, list[int]]:
    """Send ``ROUNDS`` rounds, one AvailableNow run after each; ``handle(df, batch_id, deliver)`` is the job.
    Returns each round's ids, what each batch delivered and every batch id the job was called with."""
    stream = lite_stream(shards=2)
    producer = KeyedProducer(kinesalite, stream)
    options = source_options(kinesalite, stream, tmp_path / "metadata")
    rounds: list[set[str]] = []
    delivered: dict[int, list[str]] = {}
    called: list[int] = []

    def job(df, batch_id: int) -> None:
        called.append(batch_id)

        def deliver(frame) -> None:
            delivered.setdefault(batch_id, []).extend(ids(row.asDict() for row in frame.select("data").collect()))

        handle(df, batch_id, deliver)

    for _ in range(ROUNDS):
        before = producer.sent
        producer.send(PER_ROUND)
        rounds.append(producer.sent - before)
        query = (
            spark.readStream.format(FORMAT)
            .options(**options)
            .load()
            .writeStream.foreachBatch(job)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120), "the AvailableNow run did not finish"
        assert query.exception() is None, query.exception()
    assert called == list(range(ROUNDS)), f"the job saw batches {called}: one per round expected"
    everything = [record for batch in delivered.values() for record in batch]
    assert not duplicates({"data": record.encode()} for record in everything), "a record was delivered twice"
    return rounds, delivered, called


@pytest.mark.slow
def test_skipping_odd_batches(spark, kinesalite, lite_stream, tmp_path) -> None:
    def skip_odd(df, batch_id: int, deliver) -> None:
        if batch_id % 2:
            return
        deliver(df)

    rounds, delivered, _ = run_rounds(spark, kinesalite, lite_stream, tmp_path, skip_odd)
    assert sorted(delivered) == [0, 2]
    for batch_id in (0, 2):
        assert set(delivered[batch_id]) == rounds[batch_id]


@pytest.mark.slow
def test_is_empty_then_process(spark, kinesalite, lite_stream, tmp_path) -> None:
    def unless_empty(df, batch_id: int, deliver) -> None:
        if df.isEmpty():
            return
        deliver(df)

    rounds, delivered, _ = run_rounds(spark, kinesalite, lite_stream, tmp_path, unless_empty)
    assert {batch: set(records) for batch, records in delivered.items()} == dict(enumerate(rounds))


@pytest.mark.slow
def test_show_then_process(spark, kinesalite, lite_stream, tmp_path) -> None:
    def show_first(df, batch_id: int, deliver) -> None:
        df.show()
        deliver(df)

    rounds, delivered, _ = run_rounds(spark, kinesalite, lite_stream, tmp_path, show_first)
    assert {batch: set(records) for batch, records in delivered.items()} == dict(enumerate(rounds))


@pytest.mark.slow
def test_show_only_on_odd_batches(spark, kinesalite, lite_stream, tmp_path) -> None:
    """``show()`` alone stops its read after 20 rows: those batches deliver nothing and stay skipped."""

    def show_odd(df, batch_id: int, deliver) -> None:
        if batch_id % 2:
            df.show()
            return
        deliver(df)

    rounds, delivered, _ = run_rounds(spark, kinesalite, lite_stream, tmp_path, show_odd)
    assert {batch: set(records) for batch, records in delivered.items()} == {0: rounds[0], 2: rounds[2]}


@pytest.mark.slow
def test_limit_processing(spark, kinesalite, lite_stream, tmp_path) -> None:
    def first_rows(df, batch_id: int, deliver) -> None:
        deliver(df.limit(LIMIT))

    rounds, delivered, _ = run_rounds(spark, kinesalite, lite_stream, tmp_path, first_rows)
    assert sorted(delivered) == list(range(ROUNDS))
    for batch_id, records in delivered.items():
        assert len(records) == LIMIT and set(records) <= rounds[batch_id], (batch_id, records)


@pytest.mark.slow
def test_processing_every_row_baseline(spark, kinesalite, lite_stream, tmp_path) -> None:
    """The harness itself: a job that reads every batch whole gets every round once (passes on main too)."""
    rounds, delivered, _ = run_rounds(spark, kinesalite, lite_stream, tmp_path, lambda df, _, deliver: deliver(df))
    assert {batch: set(records) for batch, records in delivered.items()} == dict(enumerate(rounds))
