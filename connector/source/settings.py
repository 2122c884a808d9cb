"""The source's options, parsed and checked once on the driver into a frozen, picklable ``SourceSettings``.

Who calls it: ``stream_reader`` and ``batch_reader`` when Spark builds them (query start / ``load()``). The
settings travel to executors inside the pickled reader.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .. import options as opts
from ..aws.settings import ClientSettings
from ..fetch.polling.settings import FIRST_CALL_LIMIT, PollingSettings
from ..metadata.location import StoreLocation
from ..options import OptionError, ParsedOptions, Side, parse_options
from ..positions import PositionSpec, ShardEnd, parse_ending_position, parse_starting_position
from ..shard_calls import min_call_gap_s, query_calls_per_s
from ..stream_ids import stream_option, streams_of

if TYPE_CHECKING:
    from ..fetch.decode import ShardContext
    from ..fetch.range import FetchLimits, ShardRange, ShardTask, ShardTransport
    from ..fetch.reads import ShardRead
    from ..metadata.store import MetadataStore

# The read path (pyarrow, botocore's client, the transports) is imported where a read is set up, not here: load()
# and Spark's planning workers check options with this module alone (docs/source.md, "A light start per Python
# worker").


@dataclass(frozen=True)
class EfoSettings:
    """The enhanced fan-out options (``kinesis.consumerType=SubscribeToShard``), checked together."""

    consumer_name: str  # as registered: kinesis.consumerNamePrefix + kinesis.consumerName
    subscribe_timeout_s: float
    subscribe_max_retries: int
    require_deregistration: bool
    # Drawn once per reader on the driver, pickled to the tasks: the job's subscription broker serves only requests
    # that present it (``fetch.fanout.client``); never compared, printed or logged.
    broker_secret: str = field(default_factory=lambda: secrets.token_hex(32), repr=False, compare=False)

    @classmethod
    def from_options(cls, parsed: ParsedOptions) -> EfoSettings | None:
        """None for GetRecords; raises OptionError when SubscribeToShard lacks a (valid) consumer name."""
        if parsed[opts.CONSUMER_TYPE.key] != "SubscribeToShard":
            return None
        name, prefix = parsed[opts.CONSUMER_NAME.key], parsed[opts.CONSUMER_NAME_PREFIX.key]
        if name is None:
            raise OptionError(
                f"option {opts.CONSUMER_NAME.name} is required with {opts.CONSUMER_TYPE.name}=SubscribeToShard: the "
                f"enhanced fan-out consumer to register or reuse ({opts.CONSUMER_NAME_PART.allowed})"
            )
        if len(prefix + name) > opts.CONSUMER_NAME_MAX:
            raise OptionError(
                f"options {opts.CONSUMER_NAME_PREFIX.name}={prefix!r} + {opts.CONSUMER_NAME.name}={name!r} make a "
                f"consumer name of {len(prefix + name)} characters: allowed is at most {opts.CONSUMER_NAME_MAX}"
            )
        return cls(
            consumer_name=prefix + name,
            subscribe_timeout_s=float(parsed[opts.SUBSCRIBE_TIMEOUT_SEC.key]),
            subscribe_max_retries=parsed[opts.SUBSCRIBE_MAX_RETRIES.key],
            require_deregistration=parsed[opts.REQUIRE_CONSUMER_DEREGISTRATION.key],
        )


def reader_connections(shards_per_partition: int) -> int:
    """Connections of a process's Kinesis client: a task reads its shards side by side, each with a call of its
    own and one asked ahead (``fetch.polling``), besides the metadata store's; never below botocore's 10. Fewer
    would make calls wait for a connection or open and drop one per call."""
    return max(10, 2 * shards_per_partition + 2)


@dataclass(frozen=True)
class SourceSettings:
    """Everything the source's driver and executor sides need from the options."""

    streams: tuple[str, ...]
    client: ClientSettings
    starting: PositionSpec
    starting_given: bool
    ending: str
    max_fetch_records: int
    max_records_per_trigger: int | None
    max_fetch_time_s: float | None
    describe_shard_interval_s: float
    fail_on_data_loss: bool
    records_per_fetch: int
    records_per_fetch_given: bool  # kinesis.getRecords.numberOfRecordsPerFetch was set: also a shard's first Limit
    fetch_interval_s: float
    probe_interval_s: float
    probe_threads: int
    max_probes_per_trigger: int
    metadata: StoreLocation  # the store new offsets name, with its endpoints and retries
    min_batches_to_retain: int
    shards_per_partition: int
    deaggregate: bool
    pass_through_corrupt: bool
    efo: EfoSettings | None = None  # kinesis.consumerType=SubscribeToShard
    ending_given: bool = False  # kinesis.endingPosition was set: a streaming read refuses it

    @classmethod
    def from_options(cls, raw: Mapping[str, Any]) -> SourceSettings:
        """Parse Spark's options dict; raises OptionError naming the option, value and what is allowed."""
        parsed = parse_options(raw, Side.SOURCE)
        streams = streams_of(parsed)  # first: the client's region may come from the streams' ARNs
        max_time = parsed[opts.MAX_FETCH_TIME_PER_SHARD_SEC.key]
        client = ClientSettings.from_options(parsed, reader_connections(parsed[opts.SHARDS_PER_PARTITION.key]))
        return cls(
            streams=streams,
            client=client,
            starting=parse_starting_position(parsed[opts.STARTING_POSITION.key]),
            starting_given=parsed.is_set(opts.STARTING_POSITION.key),
            ending=parsed[opts.ENDING_POSITION.key],
            max_fetch_records=parsed[opts.MAX_FETCH_RECORDS_PER_SHARD.key],
            max_records_per_trigger=parsed[opts.MAX_RECORDS_PER_TRIGGER.key],
            max_fetch_time_s=float(max_time) if max_time is not None else None,
            describe_shard_interval_s=parsed[opts.DESCRIBE_SHARD_INTERVAL.key],
            fail_on_data_loss=parsed[opts.FAIL_ON_DATA_LOSS.key],
            records_per_fetch=parsed[opts.RECORDS_PER_FETCH.key],
            records_per_fetch_given=parsed.is_set(opts.RECORDS_PER_FETCH.key),
            fetch_interval_s=parsed[opts.FETCH_INTERVAL_MS.key] / 1000.0,
            probe_interval_s=parsed[opts.PROBE_INTERVAL_MS.key] / 1000.0,
            probe_threads=parsed[opts.CHECK_NEW_RECORD_THREADS.key],
            max_probes_per_trigger=parsed[opts.MAX_PROBES_PER_TRIGGER.key],
            metadata=StoreLocation.from_options(parsed, client),
            min_batches_to_retain=parsed[opts.MIN_BATCHES_TO_RETAIN.key],
            shards_per_partition=parsed[opts.SHARDS_PER_PARTITION.key],
            deaggregate=parsed[opts.DEAGGREGATE.key],
            pass_through_corrupt=parsed[opts.PASS_THROUGH_CORRUPT.key],
            efo=EfoSettings.from_options(parsed),
            ending_given=parsed.is_set(opts.ENDING_POSITION.key),
        )

    @property
    def pinned(self) -> dict[str, str]:
        """The options that decide which rows exist; a query records them and refuses other values on restart."""
        return {
            stream_option(self.streams): ",".join(sorted(self.streams)),
            opts.DEAGGREGATE.name: str(self.deaggregate).lower(),
            opts.PASS_THROUGH_CORRUPT.name: str(self.pass_through_corrupt).lower(),
        }

    def ends(self) -> dict[str, ShardEnd] | None:
        """``kinesis.endingPosition`` (batch reads): None for LATEST, else each shard's inclusive end. Raises
        OptionError naming the option, the value and what is allowed."""
        try:
            return parse_ending_position(self.ending)
        except ValueError as exc:
            allowed = opts.ENDING.allowed
            raise OptionError(
                f"option {opts.ENDING_POSITION.name}={self.ending!r} is invalid ({exc}): allowed is {allowed}"
            ) from None

    def shard_context(self, task: ShardTask) -> ShardContext:
        """What decoding needs to know about the shard ``task`` reads."""
        from ..fetch.decode import ShardContext

        return ShardContext(
            task.stream,
            task.shard_id,
            task.starting_hash_key,
            task.ending_hash_key,
            self.deaggregate,
            self.pass_through_corrupt,
        )

    def transport(self, kinesis: Any, task: ShardTask, consumer_arn: str | None = None) -> ShardTransport:
        """How ``task``'s shard is read: SubscribeToShard through the enhanced fan-out consumer ``consumer_arn``
        when given (the query's consumer of ``task.stream``: ``consumers.QueryConsumers``; ``kinesis`` is then
        unused), served by the query's subscription broker on this host, which keeps the subscription open across
        micro-batches (``fetch.fanout.client``; subscriptions take their own client with the
        ``subscribeToShard.timeoutSec`` read timeout), else GetRecords through ``kinesis`` (a raw-body reader
        client). The one place that picks a transport."""
        context = self.shard_context(task)
        if consumer_arn is not None:
            assert self.efo is not None, "a consumer ARN without kinesis.consumerType=SubscribeToShard"
            retry = replace(self.client.retry, max_retries=self.efo.subscribe_max_retries)
            efo = self.efo
            from ..fetch.fanout.client import BrokeredSubscriber

            return BrokeredSubscriber(
                self.client, efo.subscribe_timeout_s, retry, consumer_arn, efo.consumer_name, context, efo.broker_secret
            )
        first = None if self.records_per_fetch_given else FIRST_CALL_LIMIT  # see PollingSettings
        gap_s = min_call_gap_s(query_calls_per_s(self.probe_interval_s))  # the driver's probes keep it too
        polling = PollingSettings(self.records_per_fetch, self.fetch_interval_s, first, gap_s)
        from ..fetch.polling.transport import GetRecordsTransport

        return GetRecordsTransport(
            kinesis, context, self.client.retry, polling, task.handoff, task.last_call_ms, task.held, task.not_before_ms
        )

    def shard_reader(
        self,
        task: ShardTask,
        limits: FetchLimits,
        consumer_arn: str | None = None,
        *,
        replay: ShardRead | None = None,
        until: tuple[str, int] | None = None,
    ) -> tuple[ShardRange, ShardTransport]:
        """How ``task``'s shard is read: its range rules (``fetch.range.ShardRange``: iterate ``batches`` or
        ``slices`` with the transport, then read ``result``) and the transport that delivers its pages
        (``transport``, through this process's reader client). The one place a shard's read is set up, for the
        stream reader's tasks (``replay``: the batch's recorded read, when it runs again), the batch reader's
        (``until``: the shard's inclusive end) and the planner's completion of reads a batch left unfinished."""
        from ..aws.clients import kinesis_reader_client
        from ..fetch.range import ShardRange

        shard_range = ShardRange(task, limits, self.shard_context(task), replay, until, self.fail_on_data_loss)
        # Enhanced fan-out never uses a GetRecords client, which costs a fresh process to make (docs/source.md,
        # "Enhanced fan-out").
        kinesis = kinesis_reader_client(self.client) if consumer_arn is None else None
        return shard_range, self.transport(kinesis, task, consumer_arn)

    @property
    def metadata_path(self) -> str:
        """The metadata store new offsets name: a path, or dynamodb://<table>?region=<r>."""
        return self.metadata.path

    def metadata_store(self, path: str) -> MetadataStore:
        """The metadata store at ``path`` (an offset's ``metadataPath``), with this query's endpoints and retries
        (``StoreLocation.open``: the application's own credentials, never the stream owner's role)."""
        return replace(self.metadata, path=path).open(self.client)
