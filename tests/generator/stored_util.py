"""What a generator run stored, against what its summary says it stored."""

from __future__ import annotations

from collections import Counter

from kinesis_generator import Summary


def assert_stored_as_reported(stored: Counter[tuple[str, bytes]], summary: Summary) -> None:
    """Each record the summary says it stored is in the stream, and nothing else, but for the copies a call that
    went unanswered may have left (``Summary.doubtful_records``: one per such call; a loaded machine can time out
    an answer, and Kinesis writes are at-least-once)."""
    assert summary.sent_records is not None and summary.doubtful_records is not None, "run with collect=True"
    sent, doubtful = Counter(summary.sent_records), Counter(summary.doubtful_records)
    wrong = {
        record: (stored[record], sent[record], doubtful[record])
        for record in stored.keys() | sent.keys()
        if not sent[record] <= stored[record] <= sent[record] + doubtful[record]
    }
    assert not wrong, f"(stored, reported stored, doubtful) of {len(wrong)} records: {list(wrong.items())[:5]}"
