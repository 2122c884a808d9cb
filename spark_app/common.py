"""What every sample job shares: its command line, the Spark session, reading and writing Kinesis, the stop
marker + SIGTERM, and the dead-letter path.

A job module (``spark_app/<job>.py``) defines ``parser()`` (this module's ``job_parser`` plus its own flags),
``start(spark, args) -> list[StreamingQuery]`` (the pipeline; tests call it on their shared session), and
``main(argv)`` = ``run_job(...)``, which ``python -m spark_app.<job>`` and ``spark-submit spark_app/<job>.py``
(EMR steps, see ``infra/packaging.py``) run.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from pyspark_aws_kinesis.cli import OneLineParser, endpoint_url, number
from spark_app.events import ERROR, PAYLOAD

log = logging.getLogger("spark_app")

KINESIS_FORMAT = "aws-kinesis"
STARTING_POSITIONS = ("TRIM_HORIZON", "LATEST")
# Columns of the source's rows that a dead letter keeps, when the source provides them, to find the record again.
SOURCE_METADATA_COLUMNS = (
    "streamName",
    "shardId",
    "partitionKey",
    "sequenceNumber",
    "subSequenceNumber",
    "approximateArrivalTimestamp",
)
FETCH_TIME_OPTION = "kinesis.maxFetchTimePerShardSec"
BATCH_TIME_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


# --- command line --------------------------------------------------------------------------------------------


def job_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """The options every job takes (the contract EMR steps are built on); jobs add their own flags to it. A mistake
    is one line on stderr and exit code 2 (``pyspark_aws_kinesis.cli``), without argparse's usage block."""
    parser = OneLineParser(prog=prog, description=description)
    streams = parser.add_argument_group("streams")
    streams.add_argument("--source-stream", required=True, help="Kinesis stream to read")
    streams.add_argument("--sink-stream", help="Kinesis stream to write (required when the job writes to Kinesis)")
    streams.add_argument("--region", required=True, help="AWS region of the streams")
    streams.add_argument(
        "--endpoint-url", type=endpoint_url, help="Kinesis endpoint (local servers); default: the region's AWS one"
    )
    streams.add_argument(
        "--starting-position",
        type=str.upper,
        choices=STARTING_POSITIONS,
        default="TRIM_HORIZON",
        help="where a query without a checkpoint starts reading (default: %(default)s)",
    )
    streams.add_argument(
        "--source-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        type=_kinesis_option,
        help="any other source option, e.g. kinesis.consumerType=SubscribeToShard (repeatable)",
    )
    streams.add_argument(
        "--sink-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        type=_kinesis_option,
        help="any other sink option, e.g. kinesis.sink.aggregationEnabled=true (repeatable)",
    )
    streams.add_argument(
        "--metadata-table",
        help="DynamoDB table for the source's per-batch shard metadata (kinesis.metadataCommitterType=DYNAMODB); "
        "default: files beside each query's checkpoint",
    )
    run = parser.add_argument_group("running")
    run.add_argument(
        "--checkpoint-location",
        required=True,
        help="root of the job's checkpoints (local path or s3://); each query uses a sub-directory",
    )
    run.add_argument(
        "--trigger-seconds",
        type=number(0, inclusive=True, unit="seconds"),
        default=10.0,
        help="micro-batch interval; 0: as fast as possible (default: %(default)s)",
    )
    run.add_argument(
        "--available-now",
        action="store_true",
        help="process what the stream holds now, then stop (instead of running until stopped)",
    )
    run.add_argument(
        "--stop-marker",
        help="path (local or s3://) whose appearance stops the job cleanly between batches; removed when obeyed",
    )
    run.add_argument(
        "--dead-letter-path",
        help="where malformed records go, as JSON lines (default: <checkpoint-location>-dead-letter)",
    )
    run.add_argument(
        "--cloudwatch-namespace",
        type=_cloudwatch_namespace,
        help="publish each query's lag, rows/s and batch duration to this CloudWatch namespace in --region, "
        "with the dimension Job=<job> (default: off; see docs/source.md)",
    )
    return parser


def _cloudwatch_namespace(text: str) -> str:
    from pyspark_aws_kinesis.metrics import MetricsConfigError, check_config

    try:
        check_config(text, {}, 1.0, 1.0)
    except MetricsConfigError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def _kinesis_option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip().lower().startswith("kinesis."):
        raise argparse.ArgumentTypeError(f"got {text!r}; allowed: KEY=VALUE with a KEY that starts with 'kinesis.'")
    return key.strip(), value


SinkNeed = bool | Callable[[Any], bool]


def parse_job_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None, *, needs_sink: SinkNeed) -> Any:
    """Parse and cross-check ``argv``; errors exit with status 2 and name the option.

    ``needs_sink`` says whether ``--sink-stream`` is required, or is a function of the parsed arguments that does.
    """
    args = parser.parse_args(argv)
    if (needs_sink(args) if callable(needs_sink) else needs_sink) and not args.sink_stream:
        parser.error("--sink-stream: missing; this job writes to Kinesis and needs the stream's name")
    if not args.dead_letter_path:
        args.dead_letter_path = args.checkpoint_location.rstrip("/") + "-dead-letter"
    return args


def child_path(root: str, name: str) -> str:
    """``root/name`` for a local path or a URI (``s3://bucket/prefix``), without doubling slashes."""
    return f"{root.rstrip('/')}/{name}"


# --- Spark ---------------------------------------------------------------------------------------------------


def build_session(app_name: str, shuffle_partitions: int = 8) -> SparkSession:
    """The job's SparkSession with the connector registered; ``spark-submit --conf`` settings win over ours.

    Called by ``run_job`` (never by tests, which share one session). Locally Python workers must run the
    interpreter that has pyarrow and boto3, hence PYSPARK_PYTHON; EMR sets it through spark.pyspark.python.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    put_project_on_worker_path()
    spark = SparkSession.builder.appName(app_name).getOrCreate()
    # 200 shuffle partitions mean 200 state stores per stateful query: far too many for a sample job's volume.
    if not spark.sparkContext.getConf().contains("spark.sql.shuffle.partitions"):
        spark.conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions))
    register_connector(spark)
    return spark


def put_project_on_worker_path() -> None:
    """Run from a checkout (``python -m spark_app.<job>``), Python workers must import ``pyspark_aws_kinesis`` too.

    Workers inherit the environment of the JVM this process is about to start. From the EMR zip (``--py-files``)
    the project root is not a directory and Spark already ships the zip to the workers: nothing to do.
    """
    root = Path(__file__).resolve().parent.parent
    if (root / "pyspark_aws_kinesis").is_dir():
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))


def publish_metrics(spark: SparkSession, args: Any, job: str) -> Any:
    """With ``--cloudwatch-namespace``, publish every query of ``spark`` to CloudWatch
    (``pyspark_aws_kinesis.metrics``); returns the listener, or None when the flag is off. Called by ``run_job`` before
    the queries start."""
    if not args.cloudwatch_namespace:
        return None
    from pyspark_aws_kinesis.metrics import publish_to_cloudwatch

    return publish_to_cloudwatch(spark, args.cloudwatch_namespace, {"Job": job}, region=args.region)


def register_connector(spark: SparkSession) -> None:
    """Register the ``aws-kinesis`` data source (every job calls this; registering twice is harmless)."""
    import pyspark_aws_kinesis

    pyspark_aws_kinesis.register(spark)


def endpoint_options(args: Any) -> dict[str, str]:
    options = {"kinesis.region": args.region}
    if args.endpoint_url:
        options["kinesis.endpointUrl"] = args.endpoint_url
    return options


def read_source(spark: SparkSession, args: Any, query_name: str) -> DataFrame:
    """The source stream as a streaming DataFrame, for the query ``query_name`` (one reader per query)."""
    return spark.readStream.format(KINESIS_FORMAT).options(**source_options(args, query_name)).load()


def source_options(args: Any, query_name: str) -> dict[str, str]:
    """The source's options for ``query_name``: ours, then the user's ``--source-option`` values over them."""
    options = {
        **endpoint_options(args),
        "kinesis.streamName": args.source_stream,
        "kinesis.startingPosition": args.starting_position,
        **metadata_options(args, query_name),
    }
    if not args.available_now:
        # An executor reads a shard until it has caught up: under a steady producer that never happens, and
        # the first batch would last as long as the producer runs. Bound it by the trigger interval.
        options[FETCH_TIME_OPTION] = str(max(1, round(args.trigger_seconds)))
    user = dict(args.source_option)
    # Option names are case-insensitive: a user's spelling of one of ours replaces ours.
    overridden = {name.lower() for name in user}
    return {**{k: v for k, v in options.items() if k.lower() not in overridden}, **user}


def metadata_options(args: Any, query_name: str) -> dict[str, str]:
    """Where the source keeps its per-batch shard positions: the ``--metadata-table`` (each query's items carry
    its own source id), else files beside the query's checkpoint (the source is not told the checkpoint)."""
    if getattr(args, "metadata_table", None):
        return {"kinesis.metadataCommitterType": "DYNAMODB", "kinesis.dynamodb.tableName": args.metadata_table}
    user = {name.lower(): value for name, value in args.source_option}
    if user.get("kinesis.metadatacommittertype", "").upper() == "DYNAMODB":
        return {}  # the user's --source-option chose DynamoDB: a path would contradict it
    return {"kinesis.metadataPath": child_path(checkpoint_of(args, query_name), "kinesis-metadata")}


def sink_options(args: Any) -> dict[str, str]:
    """Options of the Kinesis sink for the job's ``--sink-stream`` (stream and batch writes alike)."""
    return {**endpoint_options(args), "kinesis.streamName": args.sink_stream, **dict(args.sink_option)}


def checkpoint_of(args: Any, query_name: str) -> str:
    return child_path(args.checkpoint_location, query_name)


def trigger_of(args: Any) -> dict[str, Any]:
    """``DataStreamWriter.trigger`` keyword arguments for ``--available-now`` / ``--trigger-seconds``."""
    if args.available_now:
        return {"availableNow": True}
    return {"processingTime": f"{args.trigger_seconds:g} seconds"}


def start_kinesis_query(
    df: DataFrame, args: Any, job: str, query_name: str, output_mode: str = "append"
) -> StreamingQuery:
    """Write ``df`` (``data``, ``partitionKey``) to ``--sink-stream``; checkpoint in ``<checkpoint>/<query_name>``.

    ``append`` uses the aws-kinesis streaming sink directly. A Python streaming sink supports append only, so
    ``update`` (an aggregation re-emitting its changed rows each batch) goes through ``foreachBatch`` and the
    sink's batch writer: same records, same at-least-once delivery.
    """
    writer = df.writeStream.outputMode(output_mode).queryName(f"{job}-{query_name}")
    if output_mode == "append":
        writer = writer.format(KINESIS_FORMAT).options(**sink_options(args))
    else:
        writer = writer.foreachBatch(KinesisBatchWriter(sink_options(args)))
    return writer.option("checkpointLocation", checkpoint_of(args, query_name)).trigger(**trigger_of(args)).start()


@dataclass
class KinesisBatchWriter:
    """A ``foreachBatch`` function that appends each micro-batch to a Kinesis stream with the batch writer."""

    options: dict[str, str]

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        batch.write.format(KINESIS_FORMAT).options(**self.options).mode("append").save()


def batch_time(alias: str) -> Column:
    """The micro-batch's time as ISO-8601 text with milliseconds and offset.

    In a streaming query current_timestamp() is the batch's time, kept in the offset log: a replayed batch
    re-emits identical records, and a later batch always has a later time, so it orders a key's updates.
    """
    return F.date_format(F.current_timestamp(), BATCH_TIME_FORMAT).alias(alias)


def json_records(df: DataFrame, partition_key: Column, fields: Sequence[str | Column]) -> DataFrame:
    """The sink's input: ``data`` = the chosen ``fields`` as one JSON object, and ``partitionKey``."""
    return df.select(F.to_json(F.struct(*fields)).alias("data"), partition_key.cast("string").alias("partitionKey"))


# --- dead letters --------------------------------------------------------------------------------------------


@dataclass
class DeadLetterWriter:
    """A ``foreachBatch`` function that writes a micro-batch's malformed rows (``error`` set) to ``path``.

    Each batch goes to ``path/batch_id=<id>/`` as JSON lines, overwritten when Spark replays the batch after a
    failure, so a record is routed aside exactly once. ``total`` counts what this process routed; the log says
    how many each batch had. Called by the dead-letter query of country_counts, word_count and
    kinesis_to_kinesis, and inside fan_out's batch function.
    """

    path: str
    total: int = 0
    # Spark replays only the last batch, so remembering its count is enough to keep `total` exact.
    _last: tuple[int, int] = (-1, 0)

    def __call__(self, batch: DataFrame, batch_id: int) -> int:
        bad = batch.where(F.col(ERROR).isNotNull())
        rows = bad.select(*_dead_letter_columns(bad), F.lit(batch_id).alias("batchId")).persist()
        try:
            count = rows.count()
            if count:
                rows.write.mode("overwrite").json(child_path(self.path, f"batch_id={batch_id}"))
        finally:
            rows.unpersist()
        if count:
            log.warning("dead letters: batch %d routed %d malformed record(s) to %s", batch_id, count, self.path)
        self.total += count - (self._last[1] if self._last[0] == batch_id else 0)
        self._last = (batch_id, count)
        return count


def _dead_letter_columns(batch: DataFrame) -> list[Column]:
    kept = [F.col(name) for name in SOURCE_METADATA_COLUMNS if name in batch.columns]
    raw = [F.base64(F.col("data")).alias("dataBase64")] if dict(batch.dtypes).get("data") == "binary" else []
    return [F.col(ERROR), F.col(PAYLOAD), *raw, *kept]


def start_dead_letter_query(
    spark: SparkSession, args: Any, job_name: str, parse: Callable[[DataFrame], DataFrame]
) -> StreamingQuery:
    """A second query over the source that routes what ``parse`` marks malformed to ``--dead-letter-path``.

    Stateful jobs need it: once rows are aggregated their payload is gone, and a query has one sink. It reads
    the stream a second time (its own reader and checkpoint), which doubles GetRecords calls on the source.
    """
    records = parse(read_source(spark, args, "dead-letter"))
    return (
        records.where(F.col(ERROR).isNotNull())
        .writeStream.queryName(f"{job_name}-dead-letter")
        .foreachBatch(DeadLetterWriter(args.dead_letter_path))
        .option("checkpointLocation", checkpoint_of(args, "dead-letter"))
        .trigger(**trigger_of(args))
        .start()
    )


# --- stopping ------------------------------------------------------------------------------------------------


class StopMarker:
    """A file whose appearance asks the job to stop: a local path or ``s3://bucket/key``.

    S3 is reached with boto3's default chain; ``AWS_ENDPOINT_URL_S3`` or ``s3_client`` point it elsewhere.
    """

    def __init__(self, path: str, s3_client: Any = None, region: str | None = None):
        self.path = path
        url = urlparse(path)
        self.is_s3 = url.scheme in ("s3", "s3a", "s3n")
        if self.is_s3 and (not url.netloc or not url.path.strip("/")):
            raise ValueError(f"--stop-marker: got {path!r}; allowed: a local path or s3://bucket/key")
        self._bucket, self._key = url.netloc, url.path.lstrip("/")
        self._s3 = s3_client
        self._region = region

    def _client(self) -> Any:
        if self._s3 is None:
            import boto3

            self._s3 = boto3.client("s3", region_name=self._region)
        return self._s3

    def exists(self) -> bool:
        if not self.is_s3:
            return Path(self.path).exists()
        from botocore.exceptions import ClientError

        try:
            self._client().head_object(Bucket=self._bucket, Key=self._key)
            return True
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise

    def remove(self) -> None:
        """Consume the marker so the next run of the job is not stopped by the same request."""
        if self.is_s3:
            self._client().delete_object(Bucket=self._bucket, Key=self._key)
        else:
            Path(self.path).unlink(missing_ok=True)


class StopSignal:
    """Why the job should stop, if it should: SIGTERM/SIGINT, the stop marker, or ``request()`` (the demo)."""

    def __init__(self, marker: StopMarker | None = None, marker_interval_s: float = 2.0):
        self.marker = marker
        self.marker_interval_s = marker_interval_s
        self._reason: str | None = None
        self._event = threading.Event()
        self._next_marker_check = 0.0

    def request(self, reason: str) -> None:
        if self._reason is None:
            self._reason = reason
        self._event.set()

    def install_signal_handlers(self) -> Callable[[], None]:
        """Turn SIGTERM and SIGINT into a clean stop (main thread only); returns a function that undoes it."""
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
        for sig in previous:
            signal.signal(sig, lambda signum, _frame: self.request(f"received {signal.Signals(signum).name}"))

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore

    def reason(self) -> str | None:
        """The stop reason, checking the marker at most every ``marker_interval_s`` (S3 HEADs cost money)."""
        if self._reason is None and self.marker is not None and time.monotonic() >= self._next_marker_check:
            self._next_marker_check = time.monotonic() + self.marker_interval_s
            if self.marker.exists():
                self.request(f"stop marker {self.marker.path} appeared")
                self.marker.remove()
        return self._reason

    def wait(self, timeout_s: float) -> None:
        self._event.wait(timeout_s)


class QueryFailedError(RuntimeError):
    """A streaming query of the job ended with an exception."""


def run_until_stopped(
    queries: Sequence[StreamingQuery], stop: StopSignal, poll_s: float = 0.5, batch_grace_s: float = 60.0
) -> str:
    """Wait until every query finished (``--available-now``) or a stop is asked, then stop them between batches.

    Returns the reason; raises QueryFailedError (after stopping the others) when a query failed. Called by
    ``run_job`` and the demo, on the driver's main thread.
    """
    while True:
        failed = [q for q in queries if not q.isActive and q.exception() is not None]
        if failed:
            for query in queries:
                stop_between_batches(query, batch_grace_s)
            raise QueryFailedError(f"query {failed[0].name} failed: {failed[0].exception()}")
        if not any(q.isActive for q in queries):
            return "every query finished"
        reason = stop.reason()
        if reason is not None:
            log.info("stopping: %s", reason)
            for query in queries:
                stop_between_batches(query, batch_grace_s)
            return reason
        stop.wait(poll_s)


def stop_between_batches(query: StreamingQuery, grace_s: float) -> None:
    """Stop ``query`` once no micro-batch is running, so that a batch is not cut half-written.

    With a processing-time trigger a query idles between batches (once it has caught up with its backlog, and
    after the no-data batch a watermark move causes) and the stop lands there. Batches that never leave an idle
    moment (``--trigger-seconds 0`` under steady load) are interrupted after ``grace_s``; Spark then replays
    the interrupted batch from its offset log on restart, so nothing is lost.
    """
    deadline = time.monotonic() + grace_s
    while query.isActive and query.status["isTriggerActive"] and time.monotonic() < deadline:
        time.sleep(0.02)
    query.stop()


# --- main ----------------------------------------------------------------------------------------------------


def run_job(
    app_name: str,
    parser: argparse.ArgumentParser,
    start: Callable[[SparkSession, Any], list[StreamingQuery]],
    argv: Sequence[str] | None = None,
    *,
    needs_sink: SinkNeed = True,
) -> int:
    """A job's ``main``: parse ``argv``, build the session, ``serve`` the job, stop the session."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)  # one INFO line per callback otherwise
    args = parse_job_args(parser, argv, needs_sink=needs_sink)
    try:
        marker = StopMarker(args.stop_marker, region=args.region) if args.stop_marker else None
    except ValueError as error:
        parser.error(str(error))
    spark = build_session(app_name)
    try:
        publish_metrics(spark, args, app_name)
        return serve(spark, args, start, app_name, StopSignal(marker))
    finally:
        spark.stop()


def serve(
    spark: SparkSession,
    args: Any,
    start: Callable[[SparkSession, Any], list[StreamingQuery]],
    app_name: str,
    stop: StopSignal,
) -> int:
    """Start the job's queries and run them until they finish, fail, or SIGTERM/SIGINT/the marker stops them.

    Returns the exit code. Must run on the main thread (signal handlers); restores the previous handlers.
    """
    restore = stop.install_signal_handlers()
    try:
        queries = start(spark, args)
        log.info("%s started %d quer%s", app_name, len(queries), "y" if len(queries) == 1 else "ies")
        reason = run_until_stopped(queries, stop)
        log.info("%s stopped: %s", app_name, reason)
        return EXIT_OK
    except QueryFailedError as error:
        log.error("%s", error)
        return EXIT_FAILED
    finally:
        restore()
