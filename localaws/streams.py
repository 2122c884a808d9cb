"""Small boto3 helpers over any Kinesis endpoint: create a stream, put records, read a stream back.

Used by tests, the demo and benchmarks to set up and verify, never by the connector itself. Behind Kinesis's
quotas (AWS, or ``localaws.quota_proxy``) they wait and try again when a call is refused for a quota
(``patiently``), as a polite reader does, instead of failing.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.exceptions import ClientError

from localaws.fault_proxy import AMZ_JSON, KINESIS_TARGET

PUT_RECORDS_MAX_ENTRIES = 500
QUOTA_REFUSALS = frozenset({"ProvisionedThroughputExceededException", "LimitExceededException"})
T = TypeVar("T")


def patiently(call: Callable[..., T], *args: Any, wait_s: float = 0.5, give_up_s: float = 120.0, **kwargs: Any) -> T:
    """``call(*args, **kwargs)``, again every ``wait_s`` while it is refused for a quota (botocore's own retries,
    if any, come first), for up to ``give_up_s``; any other error at once."""
    deadline = time.monotonic() + give_up_s
    while True:
        try:
            return call(*args, **kwargs)
        except ClientError as error:
            if error.response["Error"]["Code"] not in QUOTA_REFUSALS or time.monotonic() > deadline:
                raise
        time.sleep(wait_s)


def unique_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def wait_for_stream_active(kinesis, stream_name: str, timeout_s: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        summary = patiently(kinesis.describe_stream_summary, StreamName=stream_name)["StreamDescriptionSummary"]
        if summary["StreamStatus"] == "ACTIVE":
            return summary
        if time.monotonic() > deadline:
            raise TimeoutError(f"stream {stream_name} still {summary['StreamStatus']} after {timeout_s} s")
        time.sleep(0.05)


def create_stream(kinesis, stream_name: str, shard_count: int = 1) -> str:
    kinesis.create_stream(StreamName=stream_name, ShardCount=shard_count)
    wait_for_stream_active(kinesis, stream_name)
    return stream_name


def put_records(
    kinesis, stream_name: str, records: Iterable[tuple[bytes, str]], max_attempts: int = 20
) -> list[dict[str, Any]]:
    """Put (data, partition_key) pairs in order-preserving batches, retrying failed entries.

    Returns one dict per record (ShardId, SequenceNumber) in input order.
    """
    results: list[dict[str, Any]] = []
    batch: list[tuple[bytes, str]] = []
    for record in records:
        batch.append(record)
        if len(batch) == PUT_RECORDS_MAX_ENTRIES:
            results.extend(_put_batch(kinesis, stream_name, batch, max_attempts))
            batch = []
    if batch:
        results.extend(_put_batch(kinesis, stream_name, batch, max_attempts))
    return results


def _put_batch(kinesis, stream_name: str, batch: list[tuple[bytes, str]], max_attempts: int) -> list[dict]:
    results: list[dict | None] = [None] * len(batch)
    pending = list(range(len(batch)))
    for attempt in range(max_attempts):
        entries = [{"Data": batch[i][0], "PartitionKey": batch[i][1]} for i in pending]
        answer = patiently(kinesis.put_records, StreamName=stream_name, Records=entries)
        still_pending = []
        for index, outcome in zip(pending, answer["Records"], strict=True):
            if "ErrorCode" in outcome:
                still_pending.append(index)
            else:
                results[index] = outcome
        pending = still_pending
        if not pending:
            return results  # type: ignore[return-value]
        time.sleep(min(0.05 * 2**attempt, 1.0))
    raise RuntimeError(f"{len(pending)} records still failed after {max_attempts} PutRecords attempts")


def iterate_shard(
    kinesis, stream_name: str, shard_id: str, iterator_type: str = "TRIM_HORIZON", after: str | None = None
) -> Iterator[dict]:
    """Every record of one shard now present, oldest first (or after the sequence number ``after``); stops at the
    tip or the shard's end."""
    if after:
        start = {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "StartingSequenceNumber": after}
    else:
        start = {"ShardIteratorType": iterator_type}
    iterator = patiently(kinesis.get_shard_iterator, StreamName=stream_name, ShardId=shard_id, **start)["ShardIterator"]
    while iterator:
        answer = patiently(kinesis.get_records, ShardIterator=iterator, Limit=10000)
        yield from answer["Records"]
        if not answer["Records"] and answer.get("MillisBehindLatest", 0) == 0:
            return
        iterator = answer.get("NextShardIterator")


def list_shard_ids(kinesis, stream_name: str) -> list[str]:
    shard_ids: list[str] = []
    kwargs: dict[str, Any] = {"StreamName": stream_name}
    while True:
        answer = patiently(kinesis.list_shards, **kwargs)
        shard_ids.extend(shard["ShardId"] for shard in answer["Shards"])
        token = answer.get("NextToken")
        if not token:
            return shard_ids
        kwargs = {"NextToken": token}


def read_stream(kinesis, stream_name: str) -> list[dict]:
    """All records of all shards (open and closed), shard by shard."""
    return [
        record
        for shard_id in list_shard_ids(kinesis, stream_name)
        for record in iterate_shard(kinesis, stream_name, shard_id)
    ]


def set_max_record_size(kinesis, stream_name: str, kib: int) -> str:
    """UpdateMaxRecordSize (kinesis-mock) whatever the client's botocore knows: EMR's (the compat venv's) predates
    the call. Returns the stream's ARN."""
    arn = kinesis.describe_stream_summary(StreamName=stream_name)["StreamDescriptionSummary"]["StreamARN"]
    raw_call(kinesis, "UpdateMaxRecordSize", {"StreamARN": arn, "MaxRecordSizeInKiB": kib})
    return arn


def max_record_size_kib(kinesis, stream_name: str) -> int:
    """The stream's MaxRecordSizeInKiB (1024 when its server says nothing: never raised), read from the answer's
    body: an older botocore's model drops the field."""
    answer = raw_call(kinesis, "DescribeStreamSummary", {"StreamName": stream_name})
    return answer["StreamDescriptionSummary"].get("MaxRecordSizeInKiB") or 1024


def raw_call(kinesis, action: str, params: dict[str, Any]) -> dict[str, Any]:
    """A Kinesis call signed with ``kinesis``'s keys and sent as JSON, past botocore's service model; raises
    urllib's HTTPError for an error answer."""
    body = json.dumps(params).encode()
    headers = {"X-Amz-Target": f"{KINESIS_TARGET}{action}", "Content-Type": AMZ_JSON}
    request = AWSRequest("POST", kinesis.meta.endpoint_url + "/", data=body, headers=headers)
    credentials = kinesis._request_signer._credentials  # the client's own keys, as a call of its would sign
    SigV4Auth(credentials, "kinesis", kinesis.meta.region_name).add_auth(request)
    with urllib.request.urlopen(urllib.request.Request(request.url, body, dict(request.headers)), timeout=30) as answer:
        return json.loads(answer.read() or b"{}")
