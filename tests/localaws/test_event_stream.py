"""Splitting a relayed SubscribeToShard answer into messages (``localaws.event_stream.event_messages``): a
multi-MiB event in one sized read after its length, whole messages however the answer is cut."""

from __future__ import annotations

import io
import os

import pytest

from localaws.event_stream import encode_event, event_messages

EVENT = {":message-type": "event", ":event-type": "SubscribeToShardEvent"}
MiB = 1 << 20


class Answer:
    """An upstream answer's ``read1`` / ``read``: at most what is asked, cut at ``cuts`` (as one socket read or one
    HTTP chunk ends), every call counted."""

    def __init__(self, data: bytes, cuts: list[int] | None = None):
        self.stream = io.BytesIO(data)
        self.cuts = sorted(cuts or [])
        self.calls = 0

    def read1(self, size: int) -> bytes:
        return self.read(size)

    def read(self, size: int) -> bytes:
        self.calls += 1
        here = self.stream.tell()
        ahead = [cut for cut in self.cuts if cut > here]
        return self.stream.read(min([size, *(cut - here for cut in ahead[:1])]))


def test_a_16_mib_event_is_read_in_one_call_after_its_first_chunk() -> None:
    """Read 64 KiB at a time, a 16 MiB event took ~260 reads, each appended to (a copy of) all that came before."""
    big, small = encode_event(EVENT, os.urandom(16 * MiB)), encode_event(EVENT, b"{}")
    answer = Answer(big + small)
    assert list(event_messages(answer)) == [big, small]
    assert answer.calls == 1 + 1 + 1 + 1  # 64 KiB, the rest of the big one, the small one, the end


def test_messages_come_out_whole_wherever_the_answer_is_cut() -> None:
    messages = [encode_event(EVENT, b"{}"), encode_event(EVENT, os.urandom(MiB + 5)), encode_event(EVENT, b"[]")]
    data = b"".join(messages)
    second = len(messages[0])
    for cut in (1, 3, 4, 5, second - 1, second, second + 2, second + 4, len(data) - len(messages[2]) - 1):
        assert list(event_messages(Answer(data, cuts=[cut]))) == messages, cut
    assert list(event_messages(Answer(data, cuts=list(range(1, 300, 3))))) == messages


def test_a_cut_message_is_dropped_and_a_bad_length_refused() -> None:
    whole = encode_event(EVENT, b"{}")
    assert list(event_messages(Answer(whole + whole[:10]))) == [whole]
    with pytest.raises(ValueError, match="at least 16"):
        list(event_messages(Answer(b"\0\0\0\x03" + whole)))
