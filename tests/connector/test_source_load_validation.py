"""Bad source options fail at ``load()`` (issue 11 item 7), for ``spark.readStream`` and ``spark.read``, with an
error naming the option and what is allowed; nothing here needs a Kinesis server (the checks need no AWS call).

Without the checks in ``KinesisDataSource.schema()`` these options pass ``load()`` and fail only at query start.
"""

from __future__ import annotations

import pytest
from source_util import FORMAT

BASE = {"kinesis.streamName": "orders", "kinesis.region": "us-east-1"}

# (case, options, texts the error must contain: the option's name and what is allowed)
BAD_OPTIONS = [
    ("missing stream name", {"kinesis.region": "us-east-1"}, ["kinesis.streamName", "is required"]),
    ("repeated stream name", {**BASE, "kinesis.streamName": "a,a"}, ["kinesis.streamName", "names a stream twice"]),
    (
        "lone access key",
        {**BASE, "kinesis.awsAccessKeyId": "AKIAEXAMPLE"},
        ["kinesis.awsAccessKeyId", "kinesis.awsSecretKey", "must be given together"],
    ),
    (
        "lone secret key",
        {**BASE, "kinesis.awsSecretKey": "secret"},
        ["kinesis.awsAccessKeyId", "kinesis.awsSecretKey", "must be given together"],
    ),
    ("malformed ending JSON", {**BASE, "kinesis.endingPosition": "{not json"}, ["kinesis.endingPosition", "allowed"]),
    (
        "ending without a sequence number",
        {**BASE, "kinesis.endingPosition": '{"shardId-000000000000": {"type": "TRIM_HORIZON"}}'},
        ["kinesis.endingPosition", "must name a sequence number"],
    ),
    (
        "retry intervals disagree",
        {**BASE, "kinesis.clientRetryIntervalsMs": "5000", "kinesis.clientMaxRetryIntervalMs": "100"},
        ["kinesis.clientRetryIntervalsMs", "kinesis.clientMaxRetryIntervalMs"],
    ),
    ("unsupported consumer type", {**BASE, "kinesis.consumerType": "SubscribeToShard"}, ["kinesis.consumerType"]),
    ("unknown option", {**BASE, "kinesis.streamNmae": "x"}, ["kinesis.streamnmae", "did you mean"]),
]


def _load_error(spark, side: str, options: dict[str, str]) -> str:
    reader = spark.readStream if side == "stream" else spark.read
    with pytest.raises(Exception) as caught:  # Spark wraps the OptionError (AnalysisException / PythonException)
        reader.format(FORMAT).options(**options).load()
    return str(caught.value)


@pytest.mark.parametrize("side", ["stream", "batch"])
@pytest.mark.parametrize(("case", "options", "expected"), BAD_OPTIONS, ids=[case for case, _, _ in BAD_OPTIONS])
def test_bad_option_fails_at_load(spark, side: str, case: str, options: dict[str, str], expected: list[str]) -> None:
    message = _load_error(spark, side, options)
    assert "OptionError" in message, f"{case}: {message[:2000]}"
    for text in expected:
        assert text in message, f"{case}: {text!r} missing from {message[:2000]}"


@pytest.mark.parametrize("side", ["stream", "batch"])
def test_good_options_load(spark, side: str) -> None:
    """The checks refuse only bad options: a complete, consistent set loads without touching AWS."""
    reader = spark.readStream if side == "stream" else spark.read
    options = {
        **BASE,
        "kinesis.awsAccessKeyId": "AKIAEXAMPLE",
        "kinesis.awsSecretKey": "secret",
        "kinesis.endingPosition": '{"shardId-000000000000": {"type": "AT_SEQUENCE_NUMBER", "sequenceNumber": "42"}}',
        "kinesis.clientRetryIntervalsMs": "100",
        "kinesis.clientMaxRetryIntervalMs": "5000",
    }
    frame = reader.format(FORMAT).options(**options).load()
    assert "data" in frame.columns
