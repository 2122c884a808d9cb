"""Publish each streaming query's health to Amazon CloudWatch, opt-in, from a ``StreamingQueryListener``.

Who calls it: the application, once per SparkSession (``publish_to_cloudwatch(spark, namespace=...,
dimensions=...)``); Spark then calls the listener's ``onQueryProgress`` after every micro-batch and ``onQueryIdle``
while a query waits, in the driver's Python process (or the Spark Connect client's). ``progress_metrics`` turns a
progress event into one ``PutMetricData`` call; a failed call is logged and dropped, never raised into Spark. What
it sends, when, and what pyspark 4.0.2 lacks: docs/source.md, "CloudWatch metrics (opt-in)".
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

from .aws.clients import client
from .aws.settings import ClientSettings, infer_region, sdk_default_region
from .errors import KinesisConnectorError

log = logging.getLogger(__name__)

DEFAULT_HEARTBEAT_S = 60.0
DEFAULT_TIMEOUT_S = 5.0
# CloudWatch's own limits (PutMetricData): 30 dimensions per metric, names up to 255, values up to 1024 chars.
MAX_DIMENSIONS = 30
MAX_DIMENSION_VALUE = 1024
NAMESPACE_RE = re.compile(r"^[0-9A-Za-z.\-_/#:]{1,255}$")
DIMENSION_NAME_RE = re.compile(r"^[\x20-\x7e]{1,255}$")
# Dimension names this module sets itself; users choose others.
QUERY, SOURCE = "Query", "Source"

COUNT, PER_SECOND, MILLIS = "Count", "Count/Second", "Milliseconds"
# Query-level metrics: (metric name, unit, how to read it from the progress dict).
QUERY_METRICS: tuple[tuple[str, str, Callable[[Mapping[str, Any]], Any]], ...] = (
    ("InputRowsPerSecond", PER_SECOND, lambda p: p.get("inputRowsPerSecond")),
    ("ProcessedRowsPerSecond", PER_SECOND, lambda p: p.get("processedRowsPerSecond")),
    ("InputRows", COUNT, lambda p: p.get("numInputRows")),
    ("BatchDuration", MILLIS, lambda p: (p.get("durationMs") or {}).get("triggerExecution")),
)
# The per-shard lag map in the source's report; its average is published, the shards themselves are not.
PER_SHARD_LAG = "millisBehindLatest"
AVG_LAG = "AvgMillisBehindLatest"
MAX_LAG = "MaxMillisBehindLatest"  # from the source's maxMillisBehindLatest
_OBJECT_ID = re.compile(r"@[0-9a-f]+$")
_JAVA_CLASS = re.compile(r"^[\w$]+(\.[\w$]+)+$")
# The per-shard refusal counts (reads and probes refused for a shard's read quota): their maximum is published.
PER_SHARD_REFUSED = "refusedCallsPerShard"
MAX_REFUSED = "MaxRefusedCallsPerShard"
# The aws-kinesis source's report carries these; another source's latestOffset (its real offset, or any offset
# on pyspark < 4.2) does not, and its numbers (file log offsets, ...) are not metrics.
REPORT_KEYS = frozenset({"maxMillisBehindLatest", PER_SHARD_LAG, "refusedCalls"})
# At most this many numbers from one source's report become metrics (each metric is billed per month).
MAX_REPORTED_NUMBERS = 20


class MetricsConfigError(KinesisConnectorError, ValueError):
    """``publish_to_cloudwatch`` got a namespace or dimensions CloudWatch would refuse."""


@dataclass(frozen=True)
class Datum:
    """One CloudWatch value: name, unit, dimensions (sorted name/value pairs) and the value."""

    name: str
    unit: str
    dimensions: tuple[tuple[str, str], ...]
    value: float

    def to_api(self) -> dict[str, Any]:
        return {
            "MetricName": self.name,
            "Unit": self.unit,
            "Value": self.value,
            "Dimensions": [{"Name": name, "Value": value} for name, value in self.dimensions],
        }


# --- progress -> metrics (pure) ------------------------------------------------------------------------------


def progress_metrics(progress: Mapping[str, Any], dimensions: Mapping[str, str]) -> list[Datum]:
    """The data of one query progress (``json.loads(event.progress.json)``) under ``dimensions`` + Query/Source.

    Query level: rows per second in and processed, input rows, batch duration. Per source: its input rows per
    second and every number of its reported ``latestOffset`` (the aws-kinesis source reports
    ``maxMillisBehindLatest``, per-shard ``millisBehindLatest`` published as their average, and its counters).
    The worst ``MaxMillisBehindLatest`` of the query's sources is also published under ``dimensions`` alone
    (e.g. Job), for alarms. Absent values are skipped, never published as 0.
    """
    query = {**dimensions, QUERY: query_label(progress)}
    data = [_datum(name, unit, query, read(progress)) for name, unit, read in QUERY_METRICS]
    worst: list[float] = []
    for index, source in enumerate(progress.get("sources") or []):
        where = {**query, SOURCE: source_label(index, source)}
        data.append(_datum("InputRowsPerSecond", PER_SECOND, where, source.get("inputRowsPerSecond")))
        for name, unit, value in reported_numbers(source):
            data.append(_datum(name, unit, where, value))
            worst += [value] if name == MAX_LAG else []
    if worst:  # the roll-up under the caller's dimensions only: one metric an alarm can name without query names
        data.append(_datum(MAX_LAG, MILLIS, dimensions, max(worst)))
    return [datum for datum in data if datum is not None]


def idle_metrics(query_label_: str, dimensions: Mapping[str, str]) -> list[Datum]:
    """The heartbeat of an idle query: nothing arrives and nothing is processed."""
    query = {**dimensions, QUERY: query_label_}
    return [_datum(name, PER_SECOND, query, 0.0) for name in ("InputRowsPerSecond", "ProcessedRowsPerSecond")]


def query_label(progress: Mapping[str, Any]) -> str:
    """The Query dimension: the query's name, else its id (stable across restarts from one checkpoint)."""
    return str(progress.get("name") or progress.get("id"))


def source_label(index: int, source: Mapping[str, Any]) -> str:
    """The Source dimension: the source's place in the query and its description without the JVM object id.

    A Python source's description is ``<package>.PythonMicroBatchStream@41fc4b1f``, new on every run: kept as
    is it would start new metrics (billed, off the dashboard) at each restart. ``0:PythonMicroBatchStream``
    stays the same while the query keeps its sources.
    """
    description = _OBJECT_ID.sub("", str(source.get("description") or "source"))
    if _JAVA_CLASS.match(description):
        description = description.rpartition(".")[2]
    return f"{index}:{description}"[:MAX_DIMENSION_VALUE]


def reported_numbers(source: Mapping[str, Any]) -> Iterator[tuple[str, str, float]]:
    """(metric name, unit, value) for each number a source reported as its latest offset.

    Only a report with the aws-kinesis lag keys (``REPORT_KEYS``) counts. It is read generically: a top-level
    number ``fooBarMs``/``...Millis...`` becomes ``FooBarMs`` in milliseconds, any other number ``FooBar`` a
    count (``refusedCalls`` becomes ``RefusedCalls``: GetRecords calls Kinesis refused for a shard's read quota
    since the driver started); the per-shard lag map gives its average, the per-shard refusals their maximum
    (``MaxRefusedCallsPerShard``: the shard most refused). Whatever is absent (pyspark before 4.2, other sources, an
    empty report) is simply not published.
    """
    report = _as_dict(source.get("latestOffset"))
    if not REPORT_KEYS & report.keys():
        return
    found = 0
    for key, value in sorted(report.items()):
        if found >= MAX_REPORTED_NUMBERS:
            return
        if key == PER_SHARD_LAG and isinstance(value, Mapping):
            lags = [lag for lag in value.values() if _is_number(lag)]
            if lags:
                found += 1
                yield AVG_LAG, MILLIS, sum(lags) / len(lags)
        elif key == PER_SHARD_REFUSED and isinstance(value, Mapping):
            counts = [count for count in value.values() if _is_number(count)]
            if counts:
                found += 1
                yield MAX_REFUSED, COUNT, max(counts)
        elif _is_number(value):
            found += 1
            yield key[:1].upper() + key[1:], _unit_of(key), float(value)


def _as_dict(offset: Any) -> Mapping[str, Any]:
    """Spark's progress JSON holds the reported offset parsed (classic) or as text (some paths): accept both."""
    if isinstance(offset, str):
        try:
            offset = json.loads(offset)
        except ValueError:
            return {}
    return offset if isinstance(offset, Mapping) else {}


def _unit_of(key: str) -> str:
    lowered = key.lower()
    return MILLIS if "millis" in lowered or lowered.endswith("ms") else COUNT


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value  # not NaN


def _datum(name: str, unit: str, dimensions: Mapping[str, str], value: Any) -> Datum | None:
    if not _is_number(value):
        return None
    return Datum(name, unit, tuple(sorted(dimensions.items())), float(value))


# --- the listener --------------------------------------------------------------------------------------------


class CloudWatchPublisher(StreamingQueryListener):
    """Puts each progress event's metrics in one PutMetricData call; while idle, one heartbeat per interval.

    ``client`` is a boto3 CloudWatch client (``pyspark_aws_kinesis.aws.clients.client("cloudwatch", ...)``). ``calls``
    and ``failures`` count PutMetricData attempts and failed ones, ``progress_events`` and ``idle_events`` what
    Spark sent (for logs and tests). Spark may call the methods
    from different threads: the bookkeeping is under a lock, the network call is not.
    """

    def __init__(
        self,
        client: Any,
        namespace: str,
        dimensions: Mapping[str, str],
        heartbeat_s: float = DEFAULT_HEARTBEAT_S,
        clock: Callable[[], float] = time.monotonic,
        queries: Callable[[str], str | None] = lambda query_id: None,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.dimensions = dict(dimensions)
        self.heartbeat_s = heartbeat_s
        self.calls = self.failures = self.progress_events = self.idle_events = 0
        self._clock = clock
        self._name_of = queries
        self._labels: dict[str, str] = {}  # query id -> Query dimension value
        self._last_put: dict[str, float] = {}  # query id -> clock() of its last PutMetricData
        self._lock = threading.Lock()

    def onQueryStarted(self, event: Any) -> None:
        with self._lock:
            self._labels[str(event.id)] = str(event.name or event.id)

    def onQueryProgress(self, event: Any) -> None:
        try:
            self._on_progress(json.loads(event.progress.json))
        except Exception:  # a malformed event must not reach Spark's listener bus either
            log.exception("CloudWatch metrics: could not publish a progress event")

    def _on_progress(self, progress: dict[str, Any]) -> None:
        query_id = str(progress.get("id"))
        with self._lock:
            self.progress_events += 1
            self._labels[query_id] = query_label(progress)
            self._last_put[query_id] = self._clock()
        self._put(progress_metrics(progress, self.dimensions), f"batch {progress.get('batchId')} of {query_id}")

    def onQueryIdle(self, event: Any) -> None:
        query_id = str(event.id)
        now = self._clock()
        with self._lock:
            self.idle_events += 1
            last = self._last_put.get(query_id)
            if last is not None and now - last < self.heartbeat_s:
                return
            self._last_put[query_id] = now
            label = self._labels.get(query_id)
        if label is None:
            label = self._name_of(query_id) or query_id
            with self._lock:
                self._labels[query_id] = label
        self._put(idle_metrics(label, self.dimensions), f"heartbeat of idle query {query_id}")

    def onQueryTerminated(self, event: Any) -> None:
        with self._lock:
            self._labels.pop(str(event.id), None)
            self._last_put.pop(str(event.id), None)

    def _put(self, data: list[Datum], what: str) -> None:
        """One PutMetricData call; any failure is logged and swallowed (Spark must never see it)."""
        if not data:
            return
        with self._lock:
            self.calls += 1
        try:
            self.client.put_metric_data(Namespace=self.namespace, MetricData=[datum.to_api() for datum in data])
        except Exception as error:  # whatever the SDK raises must not reach Spark's listener bus
            with self._lock:
                self.failures += 1
                failures = self.failures
            log.warning(
                "CloudWatch PutMetricData for %s failed (%d failure(s) so far; dropped, not retried): %s: %s",
                what,
                failures,
                type(error).__name__,
                error,
            )


# --- turning it on -------------------------------------------------------------------------------------------


def publish_to_cloudwatch(
    spark: Any,
    namespace: str,
    dimensions: Mapping[str, str] | None = None,
    *,
    region: str | None = None,
    endpoint_url: str | None = None,
    access_key_id: str | None = None,
    secret_key: str | None = None,
    session_token: str | None = None,
    heartbeat_s: float = DEFAULT_HEARTBEAT_S,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> CloudWatchPublisher:
    """Publish every streaming query of ``spark`` to CloudWatch ``namespace``; returns the registered listener.

    ``dimensions`` are added to every metric (e.g. ``{"Job": "word_count"}``); ``Query`` and ``Source`` are set
    here. Region: ``region``, else the one of ``endpoint_url``, else the SDK's default. Credentials: the keys
    given, else boto3's default chain (the EMR instance role). ``timeout_s`` bounds each call's connect and
    read; ``heartbeat_s`` is the interval of the idle heartbeat. Remove with ``spark.streams.removeListener``.
    Raises MetricsConfigError for a namespace or dimensions CloudWatch would refuse.
    """
    dimensions = dict(dimensions or {})
    check_config(namespace, dimensions, heartbeat_s, timeout_s)
    region = region or infer_region(endpoint_url) or sdk_default_region()
    if not region:
        raise MetricsConfigError("publish_to_cloudwatch: no region given or configured; pass region=, e.g. us-east-1")
    settings = ClientSettings(
        region=region,
        endpoint_url=endpoint_url,
        access_key_id=access_key_id,
        secret_key=secret_key,
        session_token=session_token,
        max_pool_connections=2,
        connect_timeout_s=timeout_s,
        read_timeout_s=timeout_s,
    )
    listener = CloudWatchPublisher(
        client("cloudwatch", settings), namespace, dimensions, heartbeat_s, queries=_query_names(spark)
    )
    spark.streams.addListener(listener)
    log.info("publishing streaming query metrics to CloudWatch namespace %s in %s", namespace, region)
    return listener


def _query_names(spark: Any) -> Callable[[str], str | None]:
    """The name of an active query by id (for a query that idles before its first progress), or None."""

    def name_of(query_id: str) -> str | None:
        try:
            query = spark.streams.get(query_id)
            return (query.name or None) if query is not None else None
        except Exception:  # a lookup failure only costs the label; the id is used instead
            return None

    return name_of


def check_config(namespace: str, dimensions: Mapping[str, str], heartbeat_s: float, timeout_s: float) -> None:
    """Raise MetricsConfigError naming every value CloudWatch (or this module) would refuse."""
    problems = []
    if not isinstance(namespace, str) or not NAMESPACE_RE.match(namespace) or namespace.startswith("AWS/"):
        problems.append(
            f"namespace: got {namespace!r}; allowed: 1-255 characters of [0-9A-Za-z.-_/#:], not starting with 'AWS/'"
        )
    if len(dimensions) > MAX_DIMENSIONS - 2:
        allowed = MAX_DIMENSIONS - 2
        problems.append(f"dimensions: got {len(dimensions)}; allowed: at most {allowed} (plus Query, Source)")
    for name, value in dimensions.items():
        if name in (QUERY, SOURCE) or not isinstance(name, str) or not DIMENSION_NAME_RE.match(name):
            problems.append(
                f"dimension name {name!r}: allowed: 1-255 printable ASCII characters, other than {QUERY!r}, {SOURCE!r}"
            )
        if not isinstance(value, str) or not 1 <= len(value) <= MAX_DIMENSION_VALUE:
            problems.append(f"dimension {name!r}: got value {value!r}; allowed: a string of 1-1024 characters")
    for label, number in (("heartbeat_s", heartbeat_s), ("timeout_s", timeout_s)):
        if not _is_number(number) or number <= 0:
            problems.append(f"{label}: got {number!r}; allowed: a number of seconds > 0")
    if problems:
        raise MetricsConfigError("publish_to_cloudwatch: " + "; ".join(problems))
