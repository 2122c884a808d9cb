"""The sink's options, parsed once on the driver (``pyspark_aws_kinesis.sink.writer``) and pickled into every task."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import options as opts
from ..aws import clients
from ..aws.settings import ClientSettings
from ..retry import RetryPolicy


@dataclass(frozen=True)
class SinkSettings:
    """What a task needs to know besides its rows: target stream, client, aggregation, parallel calls."""

    stream_name: str | None
    client: ClientSettings  # endpoint, region, credentials, retry policy: pyspark_aws_kinesis.aws builds the client
    aggregation_enabled: bool = True
    max_connections: int = 1

    @property
    def retry(self) -> RetryPolicy:
        return self.client.retry


def sink_settings(options: Mapping[str, str]) -> SinkSettings:
    """Parse Spark's raw options on the driver; raises OptionError naming any bad option and value."""
    parsed = opts.parse_options(options, opts.Side.SINK)
    connections = parsed[opts.MAX_CONNECTIONS.key]
    return SinkSettings(
        stream_name=parsed[opts.STREAM_NAME.key],
        aggregation_enabled=parsed[opts.AGGREGATION_ENABLED.key],
        max_connections=connections,
        client=ClientSettings.from_options(parsed, max_pool_connections=max(10, connections)),
    )


def kinesis_client(settings: SinkSettings) -> Any:
    """The task's Kinesis client (``pyspark_aws_kinesis.aws`` builds it from the settings' endpoint and credentials)."""
    return clients.kinesis_client(settings.client)
