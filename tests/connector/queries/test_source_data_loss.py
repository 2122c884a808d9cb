"""kinesis.failOnDataLoss on kinesis-mock: a checkpointed position whose record is gone, and a shard that vanished.

No local server trims by retention (24 h at least). The last test trims through ``localaws.fault_proxy``
(``proxy.trim``: positions before a cut-off refused, TRIM_HORIZON moved); the others lose records the other way
AWS loses them for a reader: the stream is deleted and re-created under the same name while the query is
stopped. The checkpointed sequence numbers then name records that do not exist, which kinesis-mock refuses as AWS
refuses trimmed ones.
"""

from __future__ import annotations

import logging
import time

import pytest

from localaws import LocalServer
from localaws.fault_proxy import FaultProxy
from localaws.streams import create_stream, put_records, unique_name
from pyspark_aws_kinesis.fetch.iterators import DataLossError
from pyspark_aws_kinesis.source.offsets import parse_offset
from tests.connector.support.dynamodb_util import dynamodb_options
from tests.connector.support.efo_util import efo_options
from tests.connector.support.source_util import drain, next_batch, payloads, read_all, reader, roundtrip, source_options


def _recreate(kinesis, stream: str, shards: int) -> None:
    kinesis.delete_stream(StreamName=stream)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            kinesis.describe_stream_summary(StreamName=stream)
        except kinesis.exceptions.ResourceNotFoundException:
            create_stream(kinesis, stream, shards)
            return
        time.sleep(0.1)
    raise AssertionError(f"stream {stream} was not deleted")


def _read_some_then_recreate(kinesis_mock: LocalServer, stream: str, tmp_path, shards_after: int, **extra: str):
    kinesis = kinesis_mock.client("kinesis")
    put_records(kinesis, stream, [(f"old-{i}".encode(), f"k{i}") for i in range(6)])
    options = source_options(kinesis_mock, stream, tmp_path, **extra)
    source = reader(options)
    start, batches = drain(source, roundtrip(source.initialOffset()), expect=6)
    assert sorted(payloads([row for batch in batches for row in batch])) == sorted(
        f"old-{i}".encode() for i in range(6)
    )
    _recreate(kinesis, stream, shards_after)
    new = [f"new-{i}".encode() for i in range(4)]
    put_records(kinesis, stream, [(data, f"k{i}") for i, data in enumerate(new)])
    return options, start, new


def test_a_lost_position_fails_the_query_when_asked(kinesis_mock: LocalServer, mock_stream, tmp_path) -> None:
    stream = mock_stream(shards=1)
    options, start, _new = _read_some_then_recreate(
        kinesis_mock, stream, tmp_path, 1, **{"kinesis.failOnDataLoss": "true"}
    )
    restarted = reader(options)
    with pytest.raises(DataLossError, match=rf"stream '{stream}' shard shardId-000000000000 is no longer in the shard"):
        restarted.latestOffset(start, None)


def test_a_lost_position_continues_from_the_oldest_record(kinesis_mock: LocalServer, mock_stream, tmp_path, caplog):
    stream = mock_stream(shards=1)
    options, start, new = _read_some_then_recreate(kinesis_mock, stream, tmp_path, 1)
    restarted = reader(options)
    with caplog.at_level(logging.WARNING, logger="pyspark_aws_kinesis"):
        _end, rows = next_batch(restarted, start)
    assert payloads(rows) == new  # every record still there, from the oldest
    assert "kinesis.failOnDataLoss is false, so the query continues with the oldest record" in caplog.text


def test_the_executor_detects_a_lost_position_too(kinesis_mock: LocalServer, mock_stream, tmp_path) -> None:
    """A shard whose last read stopped at a record cap is not probed: the executor meets the lost position."""
    stream = mock_stream(shards=1)
    kinesis = kinesis_mock.client("kinesis")
    put_records(kinesis, stream, [(f"old-{i}".encode(), f"k{i}") for i in range(6)])
    capped = source_options(
        kinesis_mock, stream, tmp_path, **{"kinesis.maxFetchRecordsPerShard": "2", "kinesis.failOnDataLoss": "true"}
    )
    source = reader(capped)
    start, _rows = next_batch(source, roundtrip(source.initialOffset()))
    _recreate(kinesis, stream, 1)
    put_records(kinesis, stream, [(b"new", "k")])
    end = roundtrip(source.latestOffset(start, None))  # more records known to wait: no probe
    with pytest.raises(DataLossError, match="is no longer in the shard"):
        read_all(source, list(source.partitions(start, end)))


def test_a_vanished_shard_fails_or_is_skipped(kinesis_mock: LocalServer, mock_stream, tmp_path, caplog) -> None:
    stream = mock_stream(shards=2)
    options, start, new = _read_some_then_recreate(kinesis_mock, stream, tmp_path, 1)
    strict = reader({**options, "kinesis.failOnDataLoss": "true"})
    with pytest.raises(DataLossError, match="shard shardId-000000000001 no longer exists"):
        strict.latestOffset(start, None)
    lenient = reader(options)
    with caplog.at_level(logging.WARNING, logger="pyspark_aws_kinesis"):
        _end, rows = next_batch(lenient, start)
    assert sorted(payloads(rows)) == sorted(new)  # shard 0's records: its old position was lost too
    assert "shardId-000000000001 no longer exists" in caplog.text
    report = lenient.reportLatestOffset()
    kinds = sorted((event["shard"].rsplit("/", 1)[1], event["kind"]) for event in report["dataLossEvents"])
    assert kinds == [("shardId-000000000000", "position gone"), ("shardId-000000000001", "shard gone")]
    assert report["dataLossCount"] == 2


def test_data_loss_an_executor_finds_is_reported_by_the_driver(
    kinesis_mock: LocalServer, mock_stream, tmp_path, caplog
) -> None:
    """failOnDataLoss=false: the executor goes on from the oldest record; the driver logs and reports the loss."""
    stream = mock_stream(shards=1)
    kinesis = kinesis_mock.client("kinesis")
    put_records(kinesis, stream, [(f"old-{i}".encode(), f"k{i}") for i in range(6)])
    source = reader(source_options(kinesis_mock, stream, tmp_path, **{"kinesis.maxFetchRecordsPerShard": "2"}))
    start, _rows = next_batch(source, roundtrip(source.initialOffset()))
    _recreate(kinesis, stream, 1)
    put_records(kinesis, stream, [(b"new", "k")])
    end = roundtrip(source.latestOffset(start, None))  # more records known to wait: no probe, the executor finds it
    lost_at = parse_offset(end).shards[f"{stream}/shardId-000000000000"]
    assert payloads(read_all(source, list(source.partitions(start, end)))) == [b"new"]
    source.commit(end)
    with caplog.at_level(logging.WARNING, logger="pyspark_aws_kinesis.source.health"):
        source.latestOffset(end, None)
    assert [
        r for r in caplog.records if r.name == "pyspark_aws_kinesis.source.health" and "lost data" in r.getMessage()
    ]
    (event,) = source.reportLatestOffset()["dataLossEvents"]
    assert event == {
        "batchId": 1,
        "shard": f"{stream}/shardId-000000000000",
        "kind": "position gone",
        "position": lost_at.to_json(),
    }


# --- a restart after days: positions really trimmed (localaws.fault_proxy's retention) ------------------------


def _days_later_options(kind: str, proxy: FaultProxy, stream: str, tmp_path, moto: LocalServer) -> dict[str, str]:
    """Source options through the trimming proxy: GetRecords or enhanced fan-out, a path or a DynamoDB store."""
    transport, store = kind.split("+")
    if transport == "efo":
        options = efo_options(proxy, stream, tmp_path)
    else:
        options = source_options(_Endpoint(proxy.endpoint_url), stream, tmp_path)  # type: ignore[arg-type]
    if store == "dynamodb":
        del options["kinesis.metadataPath"]
        options.update(dynamodb_options(moto.endpoint_url, unique_name("meta")))
    return options


class _Endpoint:
    def __init__(self, endpoint_url: str):
        self.endpoint_url = endpoint_url


@pytest.mark.parametrize("kind", ["polling+path", "polling+dynamodb", "efo+path", "efo+dynamodb"])
def test_a_restart_after_the_retention_fails_or_reads_on_from_the_oldest_record(
    kind: str, kinesis_mock: LocalServer, mock_stream, moto: LocalServer, tmp_path, caplog
) -> None:
    """A query stopped longer than the retention: its checkpointed position was trimmed (the proxy trims as AWS
    does), so the restart fails naming shard and position, or warns, counts the loss and reads the oldest record
    left, with every store and transport."""
    stream = mock_stream(shards=1)
    kinesis = kinesis_mock.client("kinesis")
    put_records(kinesis, stream, [(f"old-{i}".encode(), f"k{i}") for i in range(3)])
    with FaultProxy(kinesis_mock.endpoint_url) as proxy:
        options = _days_later_options(kind, proxy, stream, tmp_path, moto)
        source = reader(options)
        start, batches = drain(source, roundtrip(source.initialOffset()), expect=3)
        assert sorted(payloads([row for rows in batches for row in rows])) == [b"old-0", b"old-1", b"old-2"]
        position = parse_offset(start)
        # The query stops; records keep arriving and the oldest ones (old-*, missed-*) pass the retention.
        later = put_records(kinesis, stream, [(f"{name}".encode(), "k") for name in ("missed-0", "missed-1", "kept-0")])
        proxy.trim(stream, "shardId-000000000000", later[2]["SequenceNumber"])
        put_records(kinesis, stream, [(b"kept-1", "k")])

        strict = reader({**options, "kinesis.failOnDataLoss": "true"})
        strict.commit(start)
        with pytest.raises(DataLossError) as failure:
            strict.latestOffset(start, None)
        message = str(failure.value)
        assert f"stream '{stream}' shard shardId-000000000000" in message and "is no longer in the shard" in message
        assert "'AFTER_SEQUENCE_NUMBER'" in message and "kinesis.failOnDataLoss=false" in message
        assert proxy.stats["trimmed_positions"] >= 1

        lenient = reader(options)
        lenient.commit(start)
        with caplog.at_level(logging.WARNING, logger="pyspark_aws_kinesis"):
            end, rows = next_batch(lenient, start)
        assert payloads(rows) == [b"kept-0", b"kept-1"]  # from the oldest record left
        assert "kinesis.failOnDataLoss is false, so the query continues with the oldest record there" in caplog.text
        report = lenient.reportLatestOffset()
        assert report["dataLossCount"] == 1
        (event,) = report["dataLossEvents"]
        assert event["kind"] == "position gone" and event["shard"] == f"{stream}/shardId-000000000000"
        assert event["batchId"] == position.batch_id + 1
        assert proxy.stats["moved_trim_horizons"] >= 1
        _end, rows = drain(lenient, end)
        assert rows == []  # nothing read twice
