"""Starting positions over enhanced fan-out (kinesis-mock): TRIM_HORIZON reads every record there, AT_TIMESTAMP
exactly those that arrived at or after the timestamp, each through SubscribeToShard (counted at the fault proxy)
and none through GetRecords. (LATEST: test_efo_source.py.)"""

from __future__ import annotations

import pytest

from localaws import LocalServer
from localaws.fault_proxy import FaultProxy
from tests.connector.support.efo_util import efo_options
from tests.connector.support.source_util import payloads, read_all, reader, records_and_a_cut, roundtrip, wait_for

pytestmark = pytest.mark.slow  # a consumer registration and a subscription per test


@pytest.mark.parametrize("position", ["TRIM_HORIZON", "AT_TIMESTAMP"])
def test_starting_position_over_efo_reads_the_right_records(
    kinesis_mock: LocalServer, mock_stream, tmp_path, position: str
) -> None:
    stream = mock_stream(shards=1)
    records, cut = records_and_a_cut(kinesis_mock, stream)
    expected = [record["Data"] for record in records]
    if position == "AT_TIMESTAMP":
        position = f"AT_TIMESTAMP:{cut.isoformat()}"
        expected = [record["Data"] for record in records if record["ApproximateArrivalTimestamp"] >= cut]
        assert 0 < len(expected) < len(records)
    with FaultProxy(kinesis_mock.endpoint_url) as proxy:
        source = reader(efo_options(proxy, stream, tmp_path / "meta", **{"kinesis.startingPosition": position}))
        start = roundtrip(source.initialOffset())
        end = wait_for(lambda: source.latestOffset(start, None), 30, what="a batch planned")
        partitions = list(source.partitions(start, roundtrip(end)))
        before = dict(proxy.calls)
        rows = read_all(source, partitions)
        subscribed = proxy.calls["SubscribeToShard"] - before.get("SubscribeToShard", 0)
        polled = proxy.calls["GetRecords"] - before.get("GetRecords", 0)
    assert payloads(rows) == expected
    assert subscribed >= 1 and polled == 0
