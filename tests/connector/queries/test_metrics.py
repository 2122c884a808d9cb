"""CloudWatch publishing (pyspark_aws_kinesis.metrics) from Spark queries: real queries on kinesalite publish to moto's
CloudWatch, read back with ListMetrics/GetMetricData; a failing CloudWatch leaves the query running; idle queries
only heartbeat; bad namespaces or dimensions are named.

Calls are counted where they arrive: a FaultProxy (no faults = a recording proxy) sits in front of moto."""

from __future__ import annotations

import json
import logging
import uuid
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from localaws import LocalServer
from localaws.fault_proxy import FaultProxy, Faults
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY, free_port
from localaws.streams import put_records
from pyspark_aws_kinesis import compat
from pyspark_aws_kinesis.metrics import AVG_LAG, MetricsConfigError, publish_to_cloudwatch
from tests.connector.support.metrics_util import JOB, _progress
from tests.connector.support.source_util import FORMAT, memory_query, source_options, wait_for


def _publish(spark: Any, endpoint_url: str, namespace: str, **kwargs: Any):
    return publish_to_cloudwatch(
        spark,
        namespace,
        JOB,
        endpoint_url=endpoint_url,
        access_key_id=DUMMY_ACCESS_KEY,
        secret_key=DUMMY_SECRET_KEY,
        **kwargs,
    )


def _put(server: LocalServer, stream: str, count: int) -> None:
    put_records(server.client("kinesis"), stream, [(f"r-{i}".encode(), f"k-{i % 7}") for i in range(count)])


def _start(spark: Any, server: LocalServer, stream: str, tmp_path: Any, name: str):
    frame = spark.readStream.format(FORMAT).options(**source_options(server, stream, tmp_path / "meta")).load()
    return memory_query(frame, name, tmp_path / "checkpoint")


@pytest.fixture
def idle_every_200ms(spark):
    """Idle events every 200 ms instead of 10 s, for the queries a test starts."""
    key = "spark.sql.streaming.noDataProgressEventInterval"
    spark.conf.set(key, "200ms")
    yield
    spark.conf.unset(key)


def _stat(cloudwatch: Any, namespace: str, name: str, dimensions: dict[str, str], stat: str) -> float | None:
    now = datetime.now(UTC)
    answer = cloudwatch.get_metric_data(
        MetricDataQueries=[
            {
                "Id": "m",
                "MetricStat": {
                    "Metric": {
                        "Namespace": namespace,
                        "MetricName": name,
                        "Dimensions": [{"Name": k, "Value": v} for k, v in dimensions.items()],
                    },
                    "Period": 3600,
                    "Stat": stat,
                },
            }
        ],
        StartTime=now - timedelta(hours=1),
        EndTime=now + timedelta(minutes=5),
    )
    values = answer["MetricDataResults"][0]["Values"]  # one per period: datapoints may straddle two
    combine = {"Minimum": min, "Maximum": max}.get(stat, sum)
    return combine(values) if values else None


@pytest.mark.slow
def test_a_query_publishes_rows_duration_and_lag_and_idle_triggers_publish_nothing(
    spark, kinesalite: LocalServer, lite_stream, moto: LocalServer, tmp_path, idle_every_200ms
) -> None:
    stream = lite_stream(shards=2)
    _put(kinesalite, stream, 200)
    namespace, name = f"Test/{uuid.uuid4().hex[:8]}", f"metrics_{uuid.uuid4().hex[:8]}"
    with FaultProxy(moto.endpoint_url) as recorder:
        listener = _publish(spark, recorder.endpoint_url, namespace, heartbeat_s=3600)
        query = _start(spark, kinesalite, stream, tmp_path, name)
        try:
            query.processAllAvailable()
            wait_for(lambda: listener.idle_events >= 5, 60, what="idle events after the data was read")
            query.stop()
            wait_for(lambda: recorder.stats["forwarded"] == listener.calls, 30, what="every call to reach moto")
        finally:
            query.stop()
            spark.streams.removeListener(listener)

    assert listener.failures == 0
    # One PutMetricData per progress event; the idle triggers (heartbeat an hour away) sent none.
    assert listener.calls == listener.progress_events == recorder.stats["forwarded"]
    cloudwatch = moto.client("cloudwatch")
    published = cloudwatch.list_metrics(Namespace=namespace)["Metrics"]
    query_dims = {**JOB, "Query": name}
    by_name = {(m["MetricName"], tuple(sorted((d["Name"], d["Value"]) for d in m["Dimensions"]))) for m in published}
    for metric in ("InputRowsPerSecond", "ProcessedRowsPerSecond", "InputRows", "BatchDuration"):
        assert (metric, tuple(sorted(query_dims.items()))) in by_name, metric
    assert _stat(cloudwatch, namespace, "InputRows", query_dims, "Sum") == 200  # every record counted once
    assert _stat(cloudwatch, namespace, "ProcessedRowsPerSecond", query_dims, "Maximum") > 0
    assert _stat(cloudwatch, namespace, "BatchDuration", query_dims, "Maximum") > 0
    sources = {d["Value"] for m in published for d in m["Dimensions"] if d["Name"] == "Source"}
    assert len(sources) == 1 and sources.pop().startswith("0:PythonMicroBatchStream")  # no JVM object id
    source_metrics = {m["MetricName"] for m in published if any(d["Name"] == "Source" for d in m["Dimensions"])}
    assert "InputRowsPerSecond" in source_metrics
    job_level = {m["MetricName"] for m in published if m["Dimensions"] == [{"Name": "Job", "Value": JOB["Job"]}]}
    if compat.PYSPARK_VERSION >= (4, 2):  # reportLatestOffset: the source's lag report reaches the progress
        assert {"MaxMillisBehindLatest", AVG_LAG} <= source_metrics
        assert job_level == {"MaxMillisBehindLatest"}
    else:
        assert not source_metrics & {"MaxMillisBehindLatest", AVG_LAG}
        assert not job_level


@pytest.mark.slow
def test_a_failing_cloudwatch_leaves_the_query_running_and_is_logged(
    spark, kinesalite: LocalServer, lite_stream, moto: LocalServer, tmp_path, caplog
) -> None:
    stream = lite_stream(shards=1)
    _put(kinesalite, stream, 30)
    name = f"metrics_fail_{uuid.uuid4().hex[:8]}"
    caplog.set_level(logging.WARNING, logger="pyspark_aws_kinesis.metrics")
    with FaultProxy(moto.endpoint_url, Faults(server_error_rate=1.0)) as failing:
        listener = _publish(spark, failing.endpoint_url, "Test/failing", timeout_s=2)
        query = _start(spark, kinesalite, stream, tmp_path, name)
        try:
            query.processAllAvailable()
            wait_for(lambda: listener.failures >= 1, 30, what="a failed PutMetricData")
            _put(kinesalite, stream, 20)
            wait_for(lambda: spark.table(name).count() == 50, 60, what="the records put after the failure")
            wait_for(lambda: listener.failures >= 2, 30, what="a failed PutMetricData for the later batch")
            assert query.isActive and query.exception() is None
        finally:
            query.stop()
            spark.streams.removeListener(listener)
    # Each call reached the endpoint once: no retries.
    assert failing.stats["server_error"] == listener.calls >= listener.failures >= 1
    assert "PutMetricData" in caplog.text and "failed" in caplog.text


def test_a_closed_port_costs_one_bounded_attempt_and_no_exception(spark) -> None:
    listener = _publish(spark, f"http://127.0.0.1:{free_port()}", "Test/closed", timeout_s=1)
    spark.streams.removeListener(listener)
    listener.onQueryProgress(_progress_event(_progress("q", rows=5)))
    assert (listener.calls, listener.failures) == (1, 1)


def _progress_event(progress: dict[str, Any]) -> Any:
    return SimpleNamespace(progress=SimpleNamespace(json=json.dumps(progress)))


def test_an_idle_query_sends_one_heartbeat_per_interval(spark, moto: LocalServer) -> None:
    now = [1000.0]
    query = SimpleNamespace(id="8a1d4c3e-0000-0000-0000-000000000001", name="idle")
    namespace = f"Test/{uuid.uuid4().hex[:8]}"
    with FaultProxy(moto.endpoint_url) as recorder:
        listener = _publish(spark, recorder.endpoint_url, namespace, heartbeat_s=60)
        spark.streams.removeListener(listener)
        listener._clock = lambda: now[0]
        listener.onQueryStarted(query)
        listener.onQueryProgress(_progress_event(_progress("idle", rows=10)))
        for _ in range(59):  # idle events every second: none within a minute of the last batch
            now[0] += 1
            listener.onQueryIdle(query)
        assert recorder.stats["forwarded"] == 1
        for _ in range(120):  # two more minutes idle: one heartbeat per minute
            now[0] += 1
            listener.onQueryIdle(query)
        assert recorder.stats["forwarded"] == listener.calls == 3
    cloudwatch = moto.client("cloudwatch")
    dims = {**JOB, "Query": "idle"}
    assert _stat(cloudwatch, namespace, "InputRowsPerSecond", dims, "SampleCount") == 3
    assert _stat(cloudwatch, namespace, "InputRowsPerSecond", dims, "Minimum") == 0


@pytest.mark.parametrize(
    ("namespace", "dimensions", "named"),
    [
        ("AWS/Kinesis", {}, "namespace"),
        ("", {}, "namespace"),
        ("Jobs", {"Query": "x"}, "dimension name 'Query'"),
        ("Jobs", {"Job": ""}, "dimension 'Job'"),
    ],
)
def test_bad_namespace_or_dimensions_are_named(spark, namespace: str, dimensions: dict, named: str) -> None:
    with pytest.raises(MetricsConfigError, match=named):
        publish_to_cloudwatch(spark, namespace, dimensions, region="us-east-1")
