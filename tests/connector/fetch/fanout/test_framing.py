"""Event-stream framing of a SubscribeToShard answer (``fetch.fanout.framing``): a multi-MiB event read in one sized
read, the same messages as botocore's parser however the stream is split, and corrupt or cut streams refused."""

from __future__ import annotations

import io
import os
import zlib

import pytest
from botocore.eventstream import ChecksumMismatch, EventStreamBuffer, InvalidPayloadLength

from localaws.fault_proxy import encode_event
from pyspark_aws_kinesis.fetch.fanout.framing import PRELUDE, TruncatedMessageError, messages

EVENT = {":message-type": "event", ":event-type": "SubscribeToShardEvent", ":content-type": "application/json"}
MiB = 1 << 20


class Source:
    """A raw answer's ``read(n)``: returns at most ``n`` bytes, cut short at the byte offsets in ``cuts`` (as an
    HTTP layer returns what one chunk or one recv had), and counts its calls."""

    def __init__(self, data: bytes, cuts: list[int] | None = None):
        self.stream = io.BytesIO(data)
        self.cuts = sorted(cuts or [])
        self.calls: list[int] = []

    def read(self, size: int) -> bytes:
        self.calls.append(size)
        here = self.stream.tell()
        ahead = [cut for cut in self.cuts if cut > here]
        if ahead:
            size = min(size, ahead[0] - here)
        return self.stream.read(size)


def _botocore(data: bytes) -> list[tuple[dict, bytes]]:
    buffer = EventStreamBuffer()
    buffer.add_data(data)
    return [(message.headers, message.payload) for message in buffer]


def _ours(source: Source) -> list[tuple[dict, bytes]]:
    return [(message.headers, message.payload) for message in messages(source.read)]


def test_a_multi_mib_event_is_read_in_two_reads() -> None:
    """The prelude, then the rest in one read of its exact size: never one read (and one copy of everything so far)
    per 64 KiB chunk, which made a 16 MiB backlog event cost ~340 reads and GiBs copied."""
    payload = os.urandom(16 * MiB)
    event = encode_event(EVENT, payload)
    source = Source(event + encode_event(EVENT, b"{}"))
    found = _ours(source)
    assert [body for _, body in found] == [payload, b"{}"]
    assert source.calls[:2] == [PRELUDE.size, len(event) - PRELUDE.size]
    assert len(source.calls) == 2 + 2 + 1  # two messages, then the end of the stream


def test_short_reads_are_asked_again_for_the_rest_only() -> None:
    event = encode_event(EVENT, os.urandom(3 * MiB))
    source = Source(event, cuts=[5, 12, 100, MiB, 2 * MiB])
    assert _ours(source) == _botocore(event)
    assert sum(size for size in source.calls if size) >= len(event)
    assert len(source.calls) == 7  # one per cut, the last piece, the end


def test_every_awkward_split_gives_botocores_messages() -> None:
    """A multi-MiB event between two small ones, split inside the prelude, at its end, inside the headers, at the
    payload's first and last byte, inside the CRC, and between messages: the same messages botocore parses."""
    small = encode_event(EVENT, b'{"Records":[]}')
    big = encode_event(EVENT, os.urandom(2 * MiB + 3))
    data = small + big + small
    start = len(small)
    headers_end = start + PRELUDE.size + (len(big) - 16 - (2 * MiB + 3))
    awkward = {1, 4, 8, 11, 12, 13, start - 1, start, start + 1, start + 7, start + 12, headers_end - 1}
    awkward |= {headers_end, headers_end + 1, start + len(big) - 5, start + len(big) - 1, start + len(big)}
    expected = _botocore(data)
    assert len(expected) == 3
    for cut in sorted(awkward):
        assert _ours(Source(data, cuts=[cut])) == expected, cut
    assert _ours(Source(data, cuts=sorted(awkward))) == expected
    assert _ours(Source(data, cuts=list(range(1, 200)) + list(range(start, start + 200)))) == expected


def test_an_empty_stream_has_no_messages() -> None:
    assert _ours(Source(b"")) == []


@pytest.mark.parametrize("keep", [1, PRELUDE.size, PRELUDE.size + 3, -1])
def test_a_stream_cut_inside_a_message_is_a_recoverable_error(keep: int) -> None:
    event = encode_event(EVENT, os.urandom(1000))
    with pytest.raises(TruncatedMessageError, match="ended"):
        _ours(Source(encode_event(EVENT, b"{}") + event[:keep]))
    assert issubclass(TruncatedMessageError, ConnectionError)  # fetch.fanout.subscriber resubscribes after it


def test_corrupt_crcs_and_sizes_are_refused() -> None:
    event = bytearray(encode_event(EVENT, b"x" * 100))
    flipped = bytes(event[:-20]) + bytes([event[-20] ^ 1]) + bytes(event[-19:])
    with pytest.raises(ChecksumMismatch):
        _ours(Source(flipped))
    prelude = bytes(event[:4]) + bytes([event[4] ^ 1]) + bytes(event[5:])
    with pytest.raises(ChecksumMismatch):
        _ours(Source(prelude))
    huge = PRELUDE.pack(30 * MiB, 0, 0)[:8]
    with pytest.raises(InvalidPayloadLength):
        _ours(Source(huge + zlib.crc32(huge).to_bytes(4, "big") + b"\0" * 100))


class _RawAnswer(Source):
    """A SubscribeToShard answer's raw body, as the before-parse hook keeps it (urllib3's response)."""

    closed = released = False

    def close(self) -> None:
        self.closed = True

    def release_conn(self) -> None:
        self.released = True


def test_the_subscriber_reads_a_16_mib_backlog_event_in_two_reads() -> None:
    """Through ``ShardSubscriber`` itself: the event's records decoded from two reads of the raw answer (botocore's
    buffer took one read, and one copy of the event so far, per 64 KiB chunk: ~340 for this event)."""
    import base64
    import json
    from types import SimpleNamespace

    from pyspark_aws_kinesis.fetch.decode import ShardContext
    from pyspark_aws_kinesis.fetch.fanout.subscriber import RAW_EVENT_STREAM, ShardSubscriber, SubscribePacer
    from pyspark_aws_kinesis.positions import TRIM_HORIZON, Position
    from pyspark_aws_kinesis.retry import RetryPolicy

    chunk = os.urandom(64 * 1024)
    records = [
        {"Data": base64.b64encode(chunk).decode(), "PartitionKey": f"k{i}", "SequenceNumber": str(100 + i),
         "ApproximateArrivalTimestamp": 1700000000.5}
        for i in range(256)
    ]  # fmt: skip
    body = {"Records": records, "ContinuationSequenceNumber": "355", "MillisBehindLatest": 0}
    raw = _RawAnswer(encode_event(EVENT, json.dumps(body).encode()))
    kinesis = SimpleNamespace(
        meta=SimpleNamespace(events=SimpleNamespace(register=lambda *args, **kwargs: None)),
        subscribe_to_shard=lambda **kwargs: {RAW_EVENT_STREAM: raw},
    )
    context = ShardContext("s", "shardId-000000000000", 0, 2**128 - 1)
    pacer = SubscribePacer(interval_s=0, in_use_s=0)
    subscriber = ShardSubscriber(kinesis, "arn", context, RetryPolicy(max_retries=0), pacer=pacer)
    pages = subscriber.pages(Position(TRIM_HORIZON))
    page = next(pages)
    pages.close()
    assert len(page) == 256 and page.data[0] == chunk and page.next_iterator == "355"
    assert len(raw.calls) == 2 and raw.closed and raw.released
