"""``pyspark_aws_kinesis.source.settings``: the enhanced fan-out settings (defaults, a required and well-formed
consumer name, the prefix, numbers and flags), SubscribeToShard accepted by the source once valid, an enhanced
fan-out task that makes no GetRecords client, and the probe pool's size."""

from __future__ import annotations

import pytest

from pyspark_aws_kinesis import options as opts
from pyspark_aws_kinesis.options import OptionError, Side, parse_options
from pyspark_aws_kinesis.source.settings import EfoSettings, SourceSettings

EFO = {"kinesis.streamName": "s", "kinesis.region": "us-east-1", "kinesis.consumerType": "SubscribeToShard"}


def _efo(**extra: str) -> EfoSettings | None:
    return EfoSettings.from_options(parse_options({**EFO, **extra}, Side.SOURCE))


def test_defaults_are_the_aws_connectors() -> None:
    settings = _efo(**{"kinesis.consumerName": "app"})
    assert settings == EfoSettings(
        consumer_name="app", subscribe_timeout_s=60.0, subscribe_max_retries=10, require_deregistration=False
    )


def test_getrecords_needs_no_consumer() -> None:
    assert _efo(**{"kinesis.consumerType": "GetRecords"}) is None


def test_consumer_name_is_required_with_subscribe_to_shard() -> None:
    with pytest.raises(OptionError, match=r"option kinesis.consumerName is required with kinesis.consumerType="):
        _efo()


@pytest.mark.parametrize("name", ["", "has space", "slash/no", "é", "x" * 129])
def test_a_bad_consumer_name_names_the_option_and_what_is_allowed(name: str) -> None:
    with pytest.raises(OptionError) as info:
        _efo(**{"kinesis.consumerName": name})
    assert "kinesis.consumerName" in str(info.value) and "at most 128 letters, digits, _ . -" in str(info.value)


def test_the_prefix_is_prepended_and_the_whole_name_limited() -> None:
    settings = _efo(**{"kinesis.consumerName": "orders-efo", "kinesis.consumerNamePrefix": "team_a."})
    assert settings is not None and settings.consumer_name == "team_a.orders-efo"
    assert _efo(**{"kinesis.consumerName": "x" * 120, "kinesis.consumerNamePrefix": "p" * 8}) is not None
    with pytest.raises(OptionError, match=r"make a consumer name of 129 characters: allowed is at most 128"):
        _efo(**{"kinesis.consumerName": "x" * 120, "kinesis.consumerNamePrefix": "p" * 9})


@pytest.mark.parametrize(
    ("name", "value", "allowed"),
    [
        ("kinesis.subscribeToShard.timeoutSec", "0", "from 1 to 3600"),
        ("kinesis.subscribeToShard.maxRetries", "-1", "from 0 to 100"),
        ("kinesis.requireConsumerDeregistration", "maybe", "true or false"),
    ],
)
def test_bad_numbers_and_flags(name: str, value: str, allowed: str) -> None:
    with pytest.raises(OptionError, match=allowed):
        _efo(**{"kinesis.consumerName": "app", name: value})


def test_values_are_parsed() -> None:
    settings = _efo(
        **{
            "kinesis.consumerName": "app",
            "kinesis.subscribeToShard.timeoutSec": "5",
            "kinesis.subscribeToShard.maxRetries": "0",
            "kinesis.requireConsumerDeregistration": "TRUE",
        }
    )
    assert settings == EfoSettings("app", 5.0, 0, True)


def test_subscribe_to_shard_is_validated_then_accepted_by_the_source() -> None:
    with pytest.raises(OptionError, match="consumerName is required"):
        SourceSettings.from_options(EFO)
    settings = SourceSettings.from_options({**EFO, "kinesis.consumerName": "app"})
    assert settings.efo == EfoSettings("app", 60.0, 10, False)
    assert SourceSettings.from_options({k: v for k, v in EFO.items() if k != "kinesis.consumerType"}).efo is None
    assert opts.get("kinesis.consumerName").side == Side.SOURCE


def test_an_enhanced_fan_out_task_makes_no_getrecords_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its pages come from the broker: making a GetRecords client (0.3-0.6 s in a fresh process) would be waste."""
    from pyspark_aws_kinesis.aws import clients
    from pyspark_aws_kinesis.fetch.fanout.client import BrokeredSubscriber
    from pyspark_aws_kinesis.fetch.polling.transport import GetRecordsTransport
    from pyspark_aws_kinesis.fetch.range import FetchLimits, ShardTask
    from pyspark_aws_kinesis.positions import TRIM_HORIZON, Position

    made: list[object] = []
    monkeypatch.setattr(clients, "kinesis_reader_client", lambda client: made.append(client) or object())
    task = ShardTask("s", "shardId-000000000000", 0, 2**128 - 1, Position(TRIM_HORIZON))
    efo = SourceSettings.from_options({**EFO, "kinesis.consumerName": "app"})
    _, transport = efo.shard_reader(task, FetchLimits(), "arn:aws:kinesis:us-east-1:1:stream/s/consumer/app:1")
    assert isinstance(transport, BrokeredSubscriber) and made == []
    polling = SourceSettings.from_options({k: v for k, v in EFO.items() if k != "kinesis.consumerType"})
    _, transport = polling.shard_reader(task, FetchLimits())
    assert isinstance(transport, GetRecordsTransport) and len(made) == 1


def test_check_new_record_threads_is_parsed_into_the_settings() -> None:
    from pyspark_aws_kinesis.source.settings import SourceSettings

    def settings(**extra: str) -> SourceSettings:
        return SourceSettings.from_options({"kinesis.streamName": "s", "kinesis.region": "us-east-1", **extra})

    assert settings().probe_threads == 8
    assert settings(**{"kinesis.checkNewRecordThreads": "3"}).probe_threads == 3
    with pytest.raises(OptionError, match=r"checkNewRecordThreads='0' is invalid: allowed is an integer from 1"):
        settings(**{"kinesis.checkNewRecordThreads": "0"})
