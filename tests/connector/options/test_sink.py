"""The sink's options (``pyspark_aws_kinesis.options.sink``) as the registry parses them: aggregation, concurrent
calls and their bounds, and the two accepted for compatibility."""

from __future__ import annotations

import pytest

from pyspark_aws_kinesis import options as opts
from pyspark_aws_kinesis.options import OptionError, Side, parse_options

BASE = {"kinesis.streamName": "s", "kinesis.region": "us-east-1"}


def _parse(**extra: str):
    return parse_options({**BASE, **extra}, Side.SINK)


def test_the_defaults() -> None:
    parsed = _parse()
    assert parsed[opts.AGGREGATION_ENABLED.key] is True
    assert parsed[opts.MAX_CONNECTIONS.key] == 1
    assert (parsed[opts.FLUSH_WAIT_TIME_MS.key], parsed[opts.RECORD_MAX_BUFFERED_TIME_MS.key]) == (100, 1000)


def test_values_are_parsed() -> None:
    parsed = _parse(**{"kinesis.sink.aggregationEnabled": "FALSE", "kinesis.sink.maxConnections": "64"})
    assert parsed[opts.AGGREGATION_ENABLED.key] is False and parsed[opts.MAX_CONNECTIONS.key] == 64


@pytest.mark.parametrize("value", ["0", "65", "two"])
def test_concurrent_calls_are_1_to_64(value: str) -> None:
    with pytest.raises(OptionError, match=rf"kinesis\.sink\.maxConnections='{value}' is invalid"):
        _parse(**{"kinesis.sink.maxConnections": value})


def test_the_sinks_options_are_left_out_of_the_sources() -> None:
    sink_options = [
        opts.AGGREGATION_ENABLED,
        opts.MAX_CONNECTIONS,
        opts.FLUSH_WAIT_TIME_MS,
        opts.RECORD_MAX_BUFFERED_TIME_MS,
    ]
    assert {option.side for option in sink_options} == {Side.SINK}
    source_side = parse_options({**BASE, "kinesis.sink.maxConnections": "2"}, Side.SOURCE)
    assert opts.MAX_CONNECTIONS.key not in source_side
