"""``kinesis_generator.large_records``: ``--large-share`` of the records, evenly spread, padded to ``--large-size``
bytes (data + partition key) and stored whole on a stream raised above 1 MiB (kinesis-mock); a size over the
stream's maximum is one line naming the flag and the maximum, before anything is sent."""

from __future__ import annotations

import itertools
import json

import pytest

import kinesis_generator
from kinesis_generator.errors import UsageError
from kinesis_generator.large_records import LargeRecords
from localaws.fault_proxy import FaultProxy, Faults
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY, LocalServer
from localaws.streams import read_stream, set_max_record_size
from pyspark_aws_kinesis.sink.entries import MIB


@pytest.fixture(autouse=True)
def dummy_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", DUMMY_ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", DUMMY_SECRET_KEY)


@pytest.mark.parametrize(("share", "every"), [(0.02, 50), (0.25, 4), (1.0, 1)])
def test_the_share_is_exact_and_evenly_spread(share: float, every: int) -> None:
    large = LargeRecords(share, 100)
    picked = [index for index in range(1000) if large.is_large(index)]
    assert len(picked) == 1000 // every
    assert {b - a for a, b in itertools.pairwise(picked)} == {every}


def test_a_large_record_is_padded_to_the_size_with_its_key_and_stays_json() -> None:
    large = LargeRecords(1.0, 5000)
    key, data = large.record(0, "ключ", b'{"a": 1}')  # 8 bytes of key
    assert key == "ключ" and len(data) == 5000 - 8 and json.loads(data) == {"a": 1}
    assert LargeRecords(1.0, 3).record(0, "k", b"longer") == ("k", b"longer")  # already larger: left as it is


def test_a_run_on_a_raised_stream_stores_the_share_whole(kinesis_mock: LocalServer, mock_stream) -> None:
    stream = mock_stream(shards=1)
    kinesis = kinesis_mock.client("kinesis")
    set_max_record_size(kinesis, stream, 2048)
    summary = kinesis_generator.run(
        stream_name=stream,
        count=10,
        rate=1000,
        endpoint_url=kinesis_mock.endpoint_url,
        large=LargeRecords(0.2, 1_500_000),
        collect=True,
    )
    assert (summary.records, summary.failed) == (10, 0)
    sizes = sorted(len(r["Data"]) + len(r["PartitionKey"]) for r in read_stream(kinesis, stream))
    assert sizes[-2:] == [1_500_000, 1_500_000] and sizes[-3] < 1000
    assert all(json.loads(r["Data"]) for r in read_stream(kinesis, stream))


@pytest.mark.parametrize(
    ("size", "call_bytes"),
    [
        (1000, 500 * 1000),  # 500 records a call
        (600_000, 5 * MIB),  # a stream of 1 MiB records takes calls of 5 MiB
        (1_500_000, 10 * MIB),  # a raised stream takes calls of 10 MiB
    ],
)
def test_the_largest_call_is_500_records_within_the_streams_call_limit(size: int, call_bytes: int) -> None:
    assert LargeRecords(0.5, size).largest_call_bytes() == call_bytes


def test_a_call_answered_after_the_small_call_timeout_is_waited_for(kinesis_mock: LocalServer, mock_stream) -> None:
    """An answer 4 s late: past the 3 s a client waits for calls of up to 1 MiB, within what it waits for 10 MiB."""
    stream = mock_stream(shards=1)
    kinesis = kinesis_mock.client("kinesis")
    set_max_record_size(kinesis, stream, 2048)
    with FaultProxy(kinesis_mock.endpoint_url, Faults(latency_s=4.0, actions=frozenset({"PutRecords"}))) as proxy:
        summary = kinesis_generator.run(
            stream_name=stream, count=5, rate=1000, endpoint_url=proxy.endpoint_url, large=LargeRecords(0.2, 1_500_000)
        )
    assert (summary.records, summary.stored_again, summary.unconfirmed, summary.failed) == (5, 0, 0, 0)
    sizes = sorted(len(r["Data"]) + len(r["PartitionKey"]) for r in read_stream(kinesis, stream))
    assert len(sizes) == 5 and sizes[-1] == 1_500_000 and sizes[-2] < 1000


def test_a_size_over_the_streams_maximum_is_refused_before_sending(kinesis_mock: LocalServer, mock_stream) -> None:
    stream = mock_stream(shards=1)
    with pytest.raises(UsageError) as refused:
        kinesis_generator.run(
            stream_name=stream, count=5, endpoint_url=kinesis_mock.endpoint_url, large=LargeRecords(0.5, 1048577)
        )
    assert str(refused.value).startswith(
        "--large-size 1048577: over the stream's maximum record size of 1048576 bytes (1024 KiB); the stream's owner "
        "can raise it up to 10240 KiB"
    )
    assert refused.value.flag == "--large-size"
    assert read_stream(kinesis_mock.client("kinesis"), stream) == []


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--large-share", "2"], "--large-share needs --large-size: give both, or neither"),
        (["--large-size", "2000"], "--large-size needs --large-share: give both, or neither"),
        (["--large-share", "0", "--large-size", "9"], "--large-share: got '0'; allowed: a number of percent > 0"),
        (["--large-share", "1", "--large-size", "10485761"], "--large-size: got '10485761'; allowed: a whole number"),
    ],
)
def test_the_flags_come_as_a_pair_of_allowed_values(capsys, args: list[str], expected: str) -> None:
    from kinesis_generator.cli import main

    assert main(["--stream", "s", "--count", "5", *args]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {expected}"), err


def test_a_template_rendering_over_the_streams_maximum_is_one_line_naming_the_flag(
    kinesalite: LocalServer, lite_stream
) -> None:
    stream = lite_stream(shards=1)
    with pytest.raises(UsageError) as refused:
        kinesis_generator.run(
            stream_name=stream,
            template="x" * 1_100_000,
            partition_key="k",
            count=3,
            endpoint_url=kinesalite.endpoint_url,
        )
    assert str(refused.value).startswith(
        "--template: record of 1100001 bytes (data + partition key) is over the stream's maximum record size of "
        "1048576 bytes (1024 KiB); the stream's owner can raise it up to 10240 KiB"
    )
    assert refused.value.flag == "--template" and "\n" not in str(refused.value)
    assert read_stream(kinesalite.client("kinesis"), stream) == []
