"""The source's options (``pyspark_aws_kinesis.options.source``) as the registry parses them."""

from __future__ import annotations

import pytest

from pyspark_aws_kinesis import options as opts
from pyspark_aws_kinesis.options import Side, parse_options


@pytest.mark.parametrize(
    "text",
    [
        "AT_TIMESTAMP 2026-11-22T08:00:00Z",  # the AWS connector's form
        "AT_TIMESTAMP:2026-11-22T08:00:00Z",
        "at_timestamp  2026-11-22T09:00:00+01:00",
    ],
)
def test_starting_position_accepts_the_aws_connectors_at_timestamp_form(text: str) -> None:
    """The AWS connector documents `AT_TIMESTAMP YYYY-MM-DDTHH:MM:SSZ` (a space); ours is `AT_TIMESTAMP:`."""
    from datetime import UTC, datetime

    from pyspark_aws_kinesis.positions import AT_TIMESTAMP, parse_starting_position

    parsed = parse_options({"kinesis.startingPosition": text}, Side.SOURCE)
    position = parse_starting_position(parsed[opts.STARTING_POSITION.key]).default
    assert position.kind == AT_TIMESTAMP
    assert position.timestamp_ms == int(datetime(2026, 11, 22, 8, tzinfo=UTC).timestamp() * 1000)
