"""``pyspark_aws_kinesis.stream_ids``: streams given by ARN (``kinesis.streamARN``).

The options: one of ``kinesis.streamName`` / ``kinesis.streamARN``, ARNs checked, one region, a disagreeing
``kinesis.region`` refused at ``load()``; metadata keys that keep same-named streams of two accounts apart. Then a
reader of another account on kinesis-mock behind ``localaws.accounts.AccountProxy`` (which enforces what AWS does:
by ARN only, as the stream's resource policy allows): it reads a shared stream by ARN, is refused without the
policy and by name, and the sink is refused a write the policy does not grant, and allowed one it does.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from localaws import LocalServer
from localaws.accounts import AccountProxy
from localaws.servers import DUMMY_SECRET_KEY
from localaws.streams import list_shard_ids, put_records, read_stream
from pyspark_aws_kinesis.aws.clients import kinesis_client
from pyspark_aws_kinesis.consumers import ConsumerError, ensure_consumer
from pyspark_aws_kinesis.fetch.decode import ShardContext
from pyspark_aws_kinesis.fetch.fanout.subscriber import ShardSubscriber, subscription_client
from pyspark_aws_kinesis.options import OptionError
from pyspark_aws_kinesis.positions import TRIM_HORIZON, Position
from pyspark_aws_kinesis.sink.put_records import PutRecordsFailedError
from pyspark_aws_kinesis.source.batch_reader import KinesisBatchReader
from pyspark_aws_kinesis.source.settings import SourceSettings
from pyspark_aws_kinesis.stream_ids import StreamArn, storage_key, stream_name, stream_param
from tests.connector.support.efo_util import (
    FAST,
    FULL_RANGE,
    PATIENT,
    QUICK_WAIT,
    active_consumer,
    data,
    read_to_tip,
    settings,
)
from tests.connector.support.sink_util import write
from tests.connector.support.source_util import reader, roundtrip, run_batch

ARN = "arn:aws:kinesis:eu-west-1:111122223333:stream/orders"
READER_KEY, READER_ACCOUNT = "AKIAREADERACCOUNT001", "222233334444"
KEYS = {"kinesis.awsAccessKeyId": "AKIAIOSFODNN7EXAMPLE", "kinesis.awsSecretKey": "secret"}


def test_an_arn_names_its_stream_in_calls_and_keys() -> None:
    assert StreamArn.parse(ARN) == StreamArn("aws", "eu-west-1", "111122223333", "orders")
    assert stream_name(ARN) == "orders" and stream_name("orders") == "orders"
    assert stream_param(ARN) == {"StreamARN": ARN} and stream_param("orders") == {"StreamName": "orders"}
    other_account = ARN.replace("111122223333", "999988887777")
    china = "arn:aws-cn:kinesis:cn-north-1:111122223333:stream/orders"
    keys = [storage_key(s) for s in ("orders", ARN, other_account, china)]
    assert keys == [
        "orders",
        "orders@111122223333.eu-west-1",
        "orders@999988887777.eu-west-1",
        "orders@111122223333.cn-north-1.aws-cn",
    ]


def test_the_region_comes_from_the_arn() -> None:
    settings = SourceSettings.from_options({"kinesis.streamARN": f" {ARN} ", **KEYS})
    assert settings.streams == (ARN,) and settings.client.region == "eu-west-1"
    assert settings.pinned["kinesis.streamARN"] == ARN


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"kinesis.streamARN": ARN, "kinesis.region": "us-east-1"}, "option kinesis.region='us-east-1' disagrees "),
        ({"kinesis.streamARN": ARN, "kinesis.streamName": "orders"}, "options kinesis.streamName and kinesis.strea"),
        ({"kinesis.streamARN": "orders"}, "option kinesis.streamARN='orders' is invalid: ['orders'] must be stream "),
        ({"kinesis.streamARN": f"{ARN},{ARN}"}, "names a stream twice"),
        ({"kinesis.streamARN": f"{ARN},{ARN.replace('eu-west-1', 'eu-west-2')}x"}, "names streams in 2 regions"),
        ({}, "option kinesis.streamName (or kinesis.streamARN) is required"),
    ],
)
def test_bad_stream_options_fail_at_load_in_one_line(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError) as refused:
        SourceSettings.from_options({**options, **KEYS})
    assert message in str(refused.value) and "\n" not in str(refused.value)


# --- another account, by resource policy ----------------------------------------------------------------------


def _policy(arn: str, *actions: str) -> str:
    statement = {
        "Effect": "Allow",
        "Principal": {"AWS": f"arn:aws:iam::{READER_ACCOUNT}:root"},
        "Action": [f"kinesis:{action}" for action in actions],
        "Resource": arn,
    }
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]})


@pytest.fixture
def shared(kinesis_mock: LocalServer, mock_stream) -> Any:
    """A stream of the owner's account with two records, and a proxy that signs the reader's key to another
    account."""
    stream = mock_stream(shards=1)
    owner = kinesis_mock.client("kinesis")
    arn = owner.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["StreamARN"]
    put_records(owner, stream, [(b"r0", "k"), (b"r1", "k")])
    with AccountProxy(kinesis_mock.endpoint_url, {READER_KEY: READER_ACCOUNT}) as proxy:
        yield proxy, owner, stream, arn


def _reader_options(proxy: AccountProxy, tmp_path: Path, **stream: str) -> dict[str, str]:
    return {
        **stream,
        "kinesis.endpointUrl": proxy.endpoint_url,
        "kinesis.awsAccessKeyId": READER_KEY,
        "kinesis.awsSecretKey": DUMMY_SECRET_KEY,
        "kinesis.metadataPath": str(tmp_path / "meta"),
        "kinesis.startingPosition": "TRIM_HORIZON",
        "kinesis.getRecords.fetchIntervalMs": "0",
        "kinesis.probeIntervalMs": "0",
        "kinesis.clientNumRetries": "1",
        "kinesis.clientRetryIntervalsMs": "1",
    }


def test_another_account_reads_a_shared_stream_by_arn_as_its_policy_allows(shared, tmp_path: Path) -> None:
    proxy, owner, stream, arn = shared
    read_actions = ("DescribeStreamSummary", "ListShards", "GetShardIterator", "GetRecords")
    owner.put_resource_policy(ResourceARN=arn, Policy=_policy(arn, *read_actions))
    source = reader(_reader_options(proxy, tmp_path, **{"kinesis.streamARN": arn}))
    _, rows = run_batch(source, roundtrip(source.initialOffset()))
    assert [(bytes(row["data"]), row["streamName"]) for row in rows] == [(b"r0", stream), (b"r1", stream)]
    assert proxy.refused == []  # every call named the ARN and was allowed
    owner.delete_resource_policy(ResourceARN=arn)
    source = reader(_reader_options(proxy, tmp_path / "again", **{"kinesis.streamARN": arn}))
    with pytest.raises(Exception, match="AccessDeniedException"):
        run_batch(source, roundtrip(source.initialOffset()))
    assert {code for _, _, code in proxy.refused} == {"AccessDeniedException"}


def test_a_batch_read_by_arn_reads_the_shared_stream(shared, tmp_path: Path) -> None:
    proxy, owner, stream, arn = shared
    read_actions = ("DescribeStreamSummary", "ListShards", "GetShardIterator", "GetRecords")
    owner.put_resource_policy(ResourceARN=arn, Policy=_policy(arn, *read_actions))
    options = _reader_options(proxy, tmp_path, **{"kinesis.streamARN": arn})
    batch = KinesisBatchReader(None, {key.lower(): value for key, value in options.items()})  # type: ignore[arg-type]
    rows = [row for partition in batch.partitions() for page in batch.read(partition) for row in page.to_pylist()]
    assert [(bytes(row["data"]), row["streamName"]) for row in rows] == [(b"r0", stream), (b"r1", stream)]
    assert proxy.refused == []


def test_a_name_resolves_in_the_readers_own_account(shared, tmp_path: Path) -> None:
    proxy, owner, stream, arn = shared
    owner.put_resource_policy(ResourceARN=arn, Policy=_policy(arn, "*"))
    source = reader(_reader_options(proxy, tmp_path, **{"kinesis.streamName": stream}))
    with pytest.raises(Exception, match=f"Kinesis stream '{stream}' \\(option kinesis.streamName\\) does not exist"):
        run_batch(source, roundtrip(source.initialOffset()))


def test_another_account_reads_by_enhanced_fan_out_through_a_consumer_the_owner_shares(shared, kinesis_mock) -> None:
    """The owner registers the consumer and shares it by the consumer's policy (the CDK app's sharedConsumers); the
    reader finds it ACTIVE, registers nothing, and subscribes. Without the consumer's policy it gets one line."""
    proxy, owner, stream, arn = shared
    name = f"{READER_ACCOUNT}-country-counts"
    registered = active_consumer(kinesis_mock.endpoint_url, arn, name)
    owner.put_resource_policy(ResourceARN=arn, Policy=_policy(arn, "DescribeStreamSummary", "ListShards"))
    shared_consumer = _policy(registered.arn, "DescribeStreamConsumer", "SubscribeToShard")
    owner.put_resource_policy(ResourceARN=registered.arn, Policy=shared_consumer)
    reader_settings = replace(settings(proxy.endpoint_url), access_key_id=READER_KEY)
    found = ensure_consumer(kinesis_client(reader_settings), arn, name, FAST, QUICK_WAIT)
    assert found.arn == registered.arn and proxy.refused == []
    (shard_id,) = list_shard_ids(owner, stream)
    client = subscription_client(reader_settings, 30.0)
    sub = ShardSubscriber(client, found.arn, ShardContext(stream, shard_id, *FULL_RANGE), PATIENT, name)
    assert data(read_to_tip(sub, Position(TRIM_HORIZON))) == [b"r0", b"r1"]
    assert proxy.refused == [] and [
        c["ConsumerName"] for c in owner.list_stream_consumers(StreamARN=arn)["Consumers"]
    ] == [name]
    owner.delete_resource_policy(ResourceARN=registered.arn)
    with pytest.raises(ConsumerError) as refused:
        ensure_consumer(kinesis_client(reader_settings), arn, name, FAST, QUICK_WAIT)
    assert f"DescribeStreamConsumer of the enhanced fan-out consumer '{name}'" in str(refused.value)
    assert "kinesis.consumerName" in str(refused.value) and "\n" not in str(refused.value)
    assert proxy.refused == [(READER_ACCOUNT, "DescribeStreamConsumer", "AccessDeniedException")]
    # A name the owner never registered: the reader may not register it either.
    owner.put_resource_policy(ResourceARN=arn, Policy=_policy(arn, "DescribeStreamConsumer"))
    with pytest.raises(ConsumerError, match=r"^RegisterStreamConsumer of the enhanced fan-out consumer 'unshared'"):
        ensure_consumer(kinesis_client(reader_settings), arn, "unshared", FAST, QUICK_WAIT)


def test_the_sink_writes_by_arn_only_what_the_policy_grants(shared) -> None:
    proxy, owner, stream, arn = shared
    options = {
        "kinesis.streamARN": arn,
        "kinesis.endpointUrl": proxy.endpoint_url,
        "kinesis.awsAccessKeyId": READER_KEY,
        "kinesis.awsSecretKey": DUMMY_SECRET_KEY,
        "kinesis.clientRetryIntervalsMs": "1",
        "kinesis.sink.aggregationEnabled": "false",
    }
    owner.put_resource_policy(ResourceARN=arn, Policy=_policy(arn, "GetRecords", "ListShards"))
    with pytest.raises(PutRecordsFailedError, match="AccessDeniedException"):
        write(options, [(b"w0", "k")])
    assert len(read_stream(owner, stream)) == 2
    owner.put_resource_policy(ResourceARN=arn, Policy=_policy(arn, "PutRecords", "ListShards"))
    write(options, [(b"w1", "k")])
    assert [record["Data"] for record in read_stream(owner, stream)] == [b"r0", b"r1", b"w1"]
