"""Bad source options fail at ``load()`` (issue 11 item 7), for ``spark.readStream`` and ``spark.read``, with an
error naming the option; the metadata store's options too."""

from __future__ import annotations

import pytest

from tests.connector.support.source_util import FORMAT


def test_bad_metadata_options_fail_at_load(spark) -> None:
    base = {"kinesis.streamName": "s", "kinesis.region": "us-east-1"}
    frame = spark.readStream.format("aws-kinesis").options(**base, **{"kinesis.metadataCommitterType": "DYNAMODB"})
    with pytest.raises(Exception, match=r"option kinesis.dynamodb.tableName is required"):
        frame.load()
    frame = spark.readStream.format("aws-kinesis").options(**base, **{"kinesis.metadataCommitterType": "ZOOKEEPER"})
    with pytest.raises(Exception, match=r"kinesis.metadataCommitterType='ZOOKEEPER' is invalid"):
        frame.load()


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
    # issue 28 item 5: the option and what is allowed, never Python's own words
    (
        "word for a number",
        {**BASE, "kinesis.maxRecordsPerTrigger": "ten"},
        ["option kinesis.maxRecordsPerTrigger='ten' is invalid: allowed is an integer >= 1"],
    ),
    (
        "misspelled starting position",
        {**BASE, "kinesis.startingPosition": "LATES"},
        ["kinesis.startingPosition='LATES'", "did you mean LATEST?", "allowed is LATEST, TRIM_HORIZON"],
    ),
    (
        "region AWS does not have",
        {**BASE, "kinesis.region": "us-eest-1"},
        ["option kinesis.region='us-eest-1' is invalid", "'us-east-1'", "kinesis.allowUnknownRegion=true"],
    ),
    (
        "inferred region AWS does not have",
        {"kinesis.streamName": "orders", "kinesis.endpointUrl": "https://kinesis.eu-wset-1.amazonaws.com"},
        ["the region 'eu-wset-1'", "'eu-west-1'", "set option kinesis.region"],
    ),
]
# Python's words that must not reach the user in place of the option's
LEAKS = ("invalid literal", "allowed: LATEST")


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
    assert not any(leak in message for leak in LEAKS), message
    # The connector's line comes right after Spark's header and one frame (not under ~12 lines), and is short.
    lines = message.splitlines()
    ours = next(i for i, line in enumerate(lines) if "OptionError: " in line)
    assert ours <= 3 and len(lines[ours]) < 400, message


@pytest.mark.parametrize("endpoint", [None, "http://127.0.0.1:4567"])
def test_unknown_region_is_accepted_with_the_escape_hatch_or_a_local_endpoint(spark, endpoint: str | None) -> None:
    """A region newer than botocore loads with kinesis.allowUnknownRegion; a loopback endpoint takes any region."""
    options = {**BASE, "kinesis.region": "xx-newregion-1"}
    options.update({"kinesis.endpointUrl": endpoint} if endpoint else {"kinesis.allowUnknownRegion": "true"})
    assert "data" in spark.readStream.format(FORMAT).options(**options).load().columns


def test_ending_position_on_a_streaming_read_is_refused_when_the_query_starts(spark, tmp_path) -> None:
    """schema() cannot tell a streaming load() from a batch one, so the refusal comes at start(), first thing."""
    ending = '{"shardId-000000000000": {"type": "AT_SEQUENCE_NUMBER", "sequenceNumber": "42"}}'
    frame = spark.readStream.format(FORMAT).options(**BASE, **{"kinesis.endingPosition": ending}).load()
    with pytest.raises(Exception) as caught:
        query = frame.writeStream.format("noop").option("checkpointLocation", str(tmp_path)).start()
        try:
            query.processAllAvailable()
        finally:
            query.stop()
    message = str(caught.value)
    assert "option kinesis.endingPosition is for batch reads (spark.read) only" in message, message[:3000]


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
