"""A stream's record limits (``entries.RecordLimits``), from the ``MaxRecordSizeInKiB`` DescribeStreamSummary gives.

Who calls it: ``sink.task`` for each stream a task writes to, and the load generator once a run. A record of at most
1 MiB fits every stream, so a task without larger records asks nothing. DescribeStreamSummary is limited to 20 calls
a second an account, so answers are kept per process for ``TTL_S``; a record over a kept maximum asks again (the
stream's owner may have raised it since): docs/sink.md, "Large records".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ..aws.clients import MAX_RECORD_SIZE_KIB
from ..retry import RetryPolicy
from ..stream_ids import stream_param
from .entries import DEFAULT_LIMITS, DEFAULT_MAX_RECORD_BYTES, RecordLimits

TTL_S = 60.0
_Key = tuple[str, str, str]  # endpoint, region, stream
_known: dict[_Key, tuple[float, RecordLimits]] = {}
_lock = threading.Lock()


def describe_limits(client: Any, stream: str, retry: RetryPolicy) -> RecordLimits:
    """The stream's limits as it answers now (a stream never raised omits ``MaxRecordSizeInKiB``: 1 MiB)."""
    answer = retry.call(
        client.describe_stream_summary, **stream_param(stream), what=f"DescribeStreamSummary of {stream}"
    )
    # The connector's clients keep the field at the top whatever botocore's model (aws.clients); others parse it.
    kib = answer.get(MAX_RECORD_SIZE_KIB) or answer["StreamDescriptionSummary"].get(MAX_RECORD_SIZE_KIB)
    return RecordLimits(kib * 1024 if kib else DEFAULT_MAX_RECORD_BYTES)


def limits_for(
    client: Any, stream: str, retry: RetryPolicy, largest: int, clock: Callable[[], float] = time.monotonic
) -> RecordLimits:
    """Limits to write records of up to ``largest`` bytes with: the stream's, asked for when ``largest`` is over
    1 MiB and over what this process last heard (within ``TTL_S``); else the defaults. A record still over the
    answer's maximum is the caller's to refuse."""
    key = (str(client.meta.endpoint_url), str(client.meta.region_name), stream)
    now = clock()
    with _lock:
        stamp, known = _known.get(key, (-TTL_S, DEFAULT_LIMITS))
    fresh = now - stamp < TTL_S
    if largest <= DEFAULT_MAX_RECORD_BYTES:
        return known if fresh else DEFAULT_LIMITS
    if fresh and largest <= known.max_record_bytes:
        return known
    limits = describe_limits(client, stream, retry)
    with _lock:
        _known[key] = (now, limits)
    return limits


def forget(client: Any, stream: str) -> None:
    """Drop what this process knows of the stream's limits (a call said they changed)."""
    with _lock:
        _known.pop((str(client.meta.endpoint_url), str(client.meta.region_name), stream), None)
