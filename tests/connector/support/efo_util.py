"""Helpers for the enhanced fan-out tests: connector clients for a local endpoint, an ACTIVE consumer, reading."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

from localaws import LocalServer
from localaws.fault_proxy import FaultProxy
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY
from localaws.streams import put_records
from pyspark_aws_kinesis.aws.clients import kinesis_client
from pyspark_aws_kinesis.aws.settings import ClientSettings
from pyspark_aws_kinesis.consumers import Consumer, WaitPolicy, ensure_consumer
from pyspark_aws_kinesis.fetch.decode import Page, ShardContext
from pyspark_aws_kinesis.fetch.fanout.subscriber import ShardSubscriber, subscription_client
from pyspark_aws_kinesis.positions import Position
from pyspark_aws_kinesis.retry import RetryPolicy
from tests.connector.support.source_util import source_options

FAST = RetryPolicy(max_retries=3, initial_interval_ms=10, max_interval_ms=50)
# kinesis-mock refuses a new subscription to a consumer+shard for a few seconds after one closes, as AWS does
# for 5 s: resubscriptions need this much patience.
PATIENT = RetryPolicy(max_retries=12, initial_interval_ms=500, max_interval_ms=2000)
QUICK_WAIT = WaitPolicy(timeout_s=30, poll_s=0.1, log_every_s=1)
FULL_RANGE = (0, 2**128 - 1)


def settings(endpoint_url: str, read_timeout_s: float = 30.0) -> ClientSettings:
    return ClientSettings(
        region="us-east-1",
        endpoint_url=endpoint_url,
        access_key_id=DUMMY_ACCESS_KEY,
        secret_key=DUMMY_SECRET_KEY,
        read_timeout_s=read_timeout_s,
    )


def kinesis(endpoint_url: str) -> Any:
    """The connector's own client (pyspark_aws_kinesis.aws) for a local endpoint."""
    return kinesis_client(settings(endpoint_url))


def kinesis_for_subscriptions(endpoint_url: str, timeout_s: float = 30.0) -> Any:
    return subscription_client(settings(endpoint_url), timeout_s)


def active_consumer(endpoint_url: str, stream: str, name: str = "efo-test") -> Consumer:
    return ensure_consumer(kinesis(endpoint_url), stream, name, FAST, QUICK_WAIT)


def subscriber(
    endpoint_url: str,
    consumer: Consumer,
    stream: str,
    shard_id: str,
    retry: RetryPolicy = PATIENT,
    timeout_s: float = 30.0,
) -> ShardSubscriber:
    shard = ShardContext(stream, shard_id, *FULL_RANGE)
    client = kinesis_for_subscriptions(endpoint_url, timeout_s)
    return ShardSubscriber(client, consumer.arn, shard, retry, consumer.name)


def read_to_tip(sub: ShardSubscriber, start: Position, max_pages: int = 50) -> list[Page]:
    """Pages from ``start`` up to and including the first page at the tip (or the shard's end)."""
    pages: list[Page] = []
    with closing(sub.pages(start)) as stream:
        for page in stream:
            pages.append(page)
            if page.caught_up or len(pages) >= max_pages:
                break
    return pages


def rows(pages: list[Page]) -> list[tuple[bytes, str, str, int]]:
    """(data, partition key, sequence number, sub-sequence number) of every row, in order."""
    return [(page.data[i], page.keys[i], page.sequences[i], page.subs[i]) for page in pages for i in range(len(page))]


def data(pages: list[Page]) -> list[bytes]:
    return [item for page in pages for item in page.data]


def pages_until(stream: Iterator[Page], count: int) -> list[Page]:
    """Pages until ``count`` rows arrived (the stream stays open)."""
    taken: list[Page] = []
    while sum(len(page) for page in taken) < count:
        taken.append(next(stream))
    return taken


def sockets_to(port: int, pid: int | str = "self") -> int:
    """TCP sockets process ``pid`` (default: this one) holds open to 127.0.0.1:``port``, in any state (a leaked
    one may be CLOSE_WAIT)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    with open(f"/proc/{pid}/net/tcp") as table:
        rows = [line.split() for line in table.readlines()[1:]]
    return sum(int(fields[2].split(":")[1], 16) == port and fields[9] in inodes for fields in rows)


def efo_options(endpoint: LocalServer | FaultProxy, stream: str, metadata: Path, **extra: str) -> dict[str, str]:
    """Source options reading ``stream`` through a fresh consumer, patient enough for kinesis-mock's 5 s
    resubscription refusal."""
    server = endpoint if isinstance(endpoint, LocalServer) else None
    options = source_options(server or _AsServer(endpoint), stream, metadata)  # type: ignore[arg-type]
    return {
        **options,
        "kinesis.consumerType": "SubscribeToShard",
        "kinesis.consumerName": f"efo-{uuid.uuid4().hex[:8]}",
        "kinesis.clientRetryIntervalsMs": "500",
        "kinesis.clientMaxRetryIntervalMs": "2000",
        **extra,
    }


class _AsServer:
    """A fault proxy where ``source_options`` expects a server (it only needs the endpoint)."""

    def __init__(self, proxy: FaultProxy):
        self.endpoint_url = proxy.endpoint_url


SHARD0 = "shardId-000000000000"
SUBSCRIBE = frozenset({"SubscribeToShard"})


def _put(server: LocalServer, stream: str, items: list[bytes]) -> list[str]:
    """Put ``items`` (key = the item) in order; their sequence numbers."""
    answers = put_records(server.client("kinesis"), stream, [(item, item.decode()) for item in items])
    return [answer["SequenceNumber"] for answer in answers]


FULL = (0, 2**128 - 1)


def _page(*records: tuple[str, int]) -> Page:
    """A page of (sequence number, sub-sequence number) rows; a record's last row ends it."""
    ends = [i + 1 == len(records) or records[i + 1][0] != seq for i, (seq, _) in enumerate(records)]
    return Page(
        data=[f"{seq}/{sub}".encode() for seq, sub in records],
        keys=["k"] * len(records),
        sequences=[seq for seq, _ in records],
        subs=[sub for _, sub in records],
        arrivals_us=[None] * len(records),
        record_ends=ends,
        kinesis_records=len(set(seq for seq, _ in records)),
        last_sequence=records[-1][0],
        next_iterator=records[-1][0],
    )
