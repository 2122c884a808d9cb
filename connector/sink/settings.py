"""The sink's options, parsed once on the driver (``pyspark_aws_kinesis.sink.writer``) and pickled into every task."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import options as opts
from ..aws import clients
from ..aws.settings import ClientSettings
from ..metadata.location import StoreLocation
from ..retry import RetryPolicy
from ..stream_ids import stream_option, streams_of
from .replay import ReplayNotes


@dataclass(frozen=True)
class SinkSettings:
    """What a task needs to know besides its rows: target stream, client, aggregation, parallel calls."""

    stream_name: str | None  # the option's stream: a name or an ARN (``stream_ids``)
    client: ClientSettings  # endpoint, region, credentials, retry policy: pyspark_aws_kinesis.aws builds the client
    aggregation_enabled: bool = True
    max_connections: int = 1
    replay: ReplayNotes | None = None  # kinesis.sink.skipReplayedPartitions: where the notes live

    @property
    def retry(self) -> RetryPolicy:
        return self.client.retry


def sink_settings(options: Mapping[str, str]) -> SinkSettings:
    """Parse Spark's raw options on the driver; raises OptionError naming any bad option and value."""
    parsed = opts.parse_options(options, opts.Side.SINK)
    connections = parsed[opts.MAX_CONNECTIONS.key]
    stream = _target_stream(parsed)  # first: the client's region may come from the stream's ARN
    client = ClientSettings.from_options(parsed, max_pool_connections=max(10, connections))
    return SinkSettings(
        stream_name=stream,
        aggregation_enabled=parsed[opts.AGGREGATION_ENABLED.key],
        max_connections=connections,
        client=client,
        replay=_replay_notes(parsed, client),
    )


def _replay_notes(parsed: opts.ParsedOptions, client: ClientSettings) -> ReplayNotes | None:
    """Where ``kinesis.sink.skipReplayedPartitions`` keeps its notes: the metadata store's options, no default
    (executors must share it with the driver; a temp dir would not be)."""
    if not parsed[opts.SKIP_REPLAYED_PARTITIONS.key]:
        return None

    def no_default() -> str:
        raise opts.OptionError(
            f"option {opts.SKIP_REPLAYED_PARTITIONS.name}=true needs a store shared by driver and executors for its "
            f"notes: set {opts.METADATA_PATH.name} (e.g. <checkpoint>/kinesis-sink-notes, s3://bucket/prefix) or "
            f"{opts.METADATA_COMMITTER_TYPE.name}=DYNAMODB with {opts.DYNAMODB_TABLE_NAME.name}"
        )

    return ReplayNotes(StoreLocation.from_options(parsed, client, no_default))


def _target_stream(parsed: opts.ParsedOptions) -> str | None:
    """The one stream ``kinesis.streamName`` or ``kinesis.streamARN`` names (None: each row's streamName column)."""
    streams = streams_of(parsed, required=False)
    if len(streams) > 1:
        raise opts.OptionError(
            f"option {stream_option(streams)} names {len(streams)} streams: the sink writes to one (route rows to "
            f"several with a streamName column, without the option)"
        )
    return streams[0] if streams else None


def kinesis_client(settings: SinkSettings) -> Any:
    """The task's Kinesis client (``pyspark_aws_kinesis.aws`` builds it from the settings' endpoint and credentials)."""
    return clients.kinesis_client(settings.client)
