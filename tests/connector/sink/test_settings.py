"""``pyspark_aws_kinesis.sink.settings``: the sink's options parsed once on the driver into picklable settings."""

from __future__ import annotations

import pickle

import pytest

from pyspark_aws_kinesis.options import OptionError
from pyspark_aws_kinesis.sink.settings import SinkSettings, sink_settings

BASE = {"kinesis.streamName": "orders", "kinesis.region": "eu-west-1"}


def test_the_options_become_the_settings() -> None:
    settings = sink_settings({**BASE, "kinesis.sink.aggregationEnabled": "false", "kinesis.sink.maxConnections": "4"})
    assert (settings.stream_name, settings.aggregation_enabled, settings.max_connections) == ("orders", False, 4)
    assert settings.client.region == "eu-west-1"
    assert settings.retry is settings.client.retry


def test_the_client_pool_holds_every_concurrent_call_and_never_less_than_botocores_10() -> None:
    assert sink_settings(BASE).client.max_pool_connections == 10
    assert sink_settings({**BASE, "kinesis.sink.maxConnections": "32"}).client.max_pool_connections == 32


def test_without_a_stream_option_the_rows_name_their_stream() -> None:
    assert sink_settings({"kinesis.region": "eu-west-1"}).stream_name is None


def test_a_bad_option_is_refused_on_the_driver_naming_it() -> None:
    with pytest.raises(OptionError, match=r"kinesis\.sink\.maxConnections='0' is invalid"):
        sink_settings({**BASE, "kinesis.sink.maxConnections": "0"})


def test_the_settings_travel_pickled_to_the_tasks() -> None:
    settings = sink_settings(BASE)
    copy = pickle.loads(pickle.dumps(settings))
    assert isinstance(copy, SinkSettings) and copy == settings
