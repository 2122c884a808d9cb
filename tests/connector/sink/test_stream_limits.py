"""``pyspark_aws_kinesis.sink.stream_limits`` and the sink's large records, on kinesis-mock: a stream raised above
1 MiB takes records up to its maximum in calls of up to 10 MiB; a record over the maximum fails the task in one line
before anything is sent; the stream is asked only for records over 1 MiB, and again only when one is over what the
process last heard."""

from __future__ import annotations

import pytest

from localaws import LocalServer
from localaws.fault_proxy import FaultProxy
from localaws.streams import set_max_record_size
from pyspark_aws_kinesis.aws.clients import kinesis_client
from pyspark_aws_kinesis.kpl import hash_key_of
from pyspark_aws_kinesis.retry import RetryPolicy
from pyspark_aws_kinesis.sink import stream_limits
from pyspark_aws_kinesis.sink.columns import KinesisSinkInputError
from pyspark_aws_kinesis.sink.entries import RecordLimits
from tests.connector.support.sink_util import _stored_rows, sink_options, write
from tests.connector.support.source_util import client_settings

MIB = 1024 * 1024
RETRY = RetryPolicy(3, 1, 5)


@pytest.fixture
def proxied(kinesis_mock: LocalServer):
    with FaultProxy(kinesis_mock.endpoint_url) as proxy:
        yield proxy


def _key_on_each_of_2_shards() -> list[str]:
    """A partition key for each shard of a 2-shard stream (kinesis-mock splits the hash range evenly)."""
    by_shard: dict[int, str] = {}
    for i in range(20):
        by_shard.setdefault(hash_key_of(f"k{i}") >> 127, f"k{i}")
    return [by_shard[0], by_shard[1]]


def test_a_raised_stream_takes_records_over_1_mib_in_calls_of_up_to_10_mib(
    kinesis_mock: LocalServer, mock_stream, proxied: FaultProxy
) -> None:
    # Small as large records go: kinesis-mock takes about a second a MiB.
    stream = mock_stream(shards=2)
    set_max_record_size(kinesis_mock.client("kinesis"), stream, 3072)
    keys = _key_on_each_of_2_shards()
    records = [(b"A" * (2600 * 1024), keys[0]), (b"B" * (2600 * 1024), keys[1])]
    _, message = write(sink_options(proxied.endpoint_url, stream), records)
    assert _stored_rows(kinesis_mock, stream) == {record: 1 for record in records}
    # 5.1 MiB for two shards in one call (a 5 MiB call would take one of the two)
    assert message.put.calls == proxied.calls["PutRecords"] == 1
    assert proxied.calls["DescribeStreamSummary"] == 1


@pytest.mark.parametrize(("kib", "size"), [(None, MIB), (2048, 2 * MIB + 100)])
def test_a_record_over_the_streams_maximum_fails_the_task_in_one_line_and_sends_nothing(
    kinesis_mock: LocalServer, mock_stream, kib: int | None, size: int
) -> None:
    stream = mock_stream(shards=1)
    if kib:
        set_max_record_size(kinesis_mock.client("kinesis"), stream, kib)
    records = [(b"before", "k"), (b"x" * size, "key"), (b"after", "k")]
    with pytest.raises(KinesisSinkInputError) as failure:
        write(sink_options(kinesis_mock.endpoint_url, stream), records)
    maximum = (kib or 1024) * 1024
    assert str(failure.value) == (
        f"Nothing was sent to Kinesis by this task: a record of {size + 3} bytes (data + partition key) is over the "
        f"maximum record size of stream '{stream}', {maximum} bytes ({kib or 1024} KiB); the stream's owner can "
        f"raise it up to 10240 KiB (aws kinesis update-max-record-size --stream-arn ARN --max-record-size-in-ki-b N)."
    )
    assert "\n" not in str(failure.value)
    assert _stored_rows(kinesis_mock, stream) == {}


def test_the_stream_is_asked_only_for_records_over_1_mib_and_over_what_was_heard(
    kinesis_mock: LocalServer, mock_stream, proxied: FaultProxy
) -> None:
    stream = mock_stream(shards=1)
    client = kinesis_client(client_settings(proxied))  # the connector's: it reads the field any botocore drops
    now = [0.0]

    def limits(largest: int) -> RecordLimits:
        return stream_limits.limits_for(client, stream, RETRY, largest, clock=lambda: now[0])

    def asked() -> int:
        return proxied.calls["DescribeStreamSummary"]

    assert limits(MIB) == RecordLimits() and asked() == 0  # fits every stream: nothing to ask
    assert limits(MIB + 1) == RecordLimits(MIB) and asked() == 1  # never raised: the answer has no maximum
    assert limits(MIB + 1) == RecordLimits(MIB) and asked() == 2  # over what was heard: maybe raised since
    set_max_record_size(kinesis_mock.client("kinesis"), stream, 3072)
    assert limits(2 * MIB) == RecordLimits(3 * MIB) and asked() == 3
    assert limits(3 * MIB) == RecordLimits(3 * MIB) and asked() == 3  # within what was heard: not asked
    assert limits(100) == RecordLimits(3 * MIB) and asked() == 3  # known: small records get the 10 MiB calls too
    now[0] += stream_limits.TTL_S
    assert limits(100) == RecordLimits() and asked() == 3  # forgotten after the TTL, and not worth a call
    assert limits(2 * MIB) == RecordLimits(3 * MIB) and asked() == 4
    stream_limits.forget(client, stream)
    assert limits(2 * MIB) == RecordLimits(3 * MIB) and asked() == 5
