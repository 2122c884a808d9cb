"""Watching the pipeline: a CloudWatch dashboard, alarms, an optional SNS topic for them, and the job roles'
permission to publish the job's own metrics (``pyspark_aws_kinesis.metrics``, turned on by the EMR step's
``--cloudwatch-namespace``).

Built by `infra.app.build_app` after the streams and access stacks and before the EMR stack (the job must be
allowed to publish before its step runs). What the job publishes, and what the alarms mean: docs/infra.md.
"""

from __future__ import annotations

from aws_cdk import CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from infra import nag
from infra.config import InfraConfig

# The dimension pyspark_aws_kinesis.metrics adds for a sample job (spark_app.common.publish_metrics: Job=<job module>).
JOB_DIMENSION = "Job"
ONE_MINUTE = Duration.minutes(1)
FIVE_MINUTES = Duration.minutes(5)
# Lag alarms: the threshold must hold this many minutes in a row (one slow batch is not an incident).
LAG_MINUTES = 3
# Throttling alarms: throttled requests in each of this many 5-minute periods in a row. The connector retries
# throttled calls, so a blip costs latency only; sustained throttling means the shards are too few.
THROTTLE_PERIODS = 3


class MonitoringStack(Stack):
    """Dashboard + alarms on the source stream, the sink stream and the job's published metrics."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: InfraConfig,
        source: kinesis.IStream,
        sink: kinesis.IStream,
        job_roles: list[iam.IRole],
        job: str,
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        self.job = job
        self.publish_policy = self._publish_policy(job_roles)
        self.topic = self._topic() if config.alarm_email else None
        self.alarms = self._alarms(source, sink)
        self.dashboard = self._dashboard(source, sink)
        CfnOutput(self, "DashboardName", value=self.dashboard.dashboard_name)
        if self.topic is not None:
            CfnOutput(self, "AlarmTopicArn", value=self.topic.topic_arn)

    # --- the job's metrics ---------------------------------------------------------------------------------

    def job_metric(self, name: str, statistic: str) -> cw.Metric:
        """A metric the job publishes under its Job dimension alone (pyspark_aws_kinesis.metrics' roll-up)."""
        return cw.Metric(
            namespace=self.config.cloudwatch_namespace,
            metric_name=name,
            dimensions_map={JOB_DIMENSION: self.job},
            statistic=statistic,
            period=ONE_MINUTE,
        )

    def job_search(self, name: str, statistic: str, label: str, per_source: bool = False) -> cw.MathExpression:
        """Every series of ``name`` the job publishes per query (or per source): a dashboard-only SEARCH."""
        schema = ",".join([f'"{self.config.cloudwatch_namespace}"', JOB_DIMENSION, "Query", *["Source"] * per_source])
        search = f'{{{schema}}} MetricName="{name}" {JOB_DIMENSION}="{self.job}"'
        return cw.MathExpression(
            expression=f"SEARCH('{search}', '{statistic}', 60)",
            using_metrics={},
            label=label,
            period=ONE_MINUTE,
        )

    def _publish_policy(self, roles: list[iam.IRole]) -> iam.Policy:
        """PutMetricData in the job's namespace only, for the roles the job runs as (the cluster's instance role,
        the Serverless job role); the action has no resources, so the namespace condition is the whole scope
        (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoncloudwatch.html)."""
        policy = iam.Policy(
            self,
            "PublishJobMetrics",
            roles=roles,
            statements=[
                iam.PolicyStatement(
                    sid="PutJobMetrics",
                    actions=["cloudwatch:PutMetricData"],
                    resources=["*"],
                    conditions={"StringEquals": {"cloudwatch:namespace": self.config.cloudwatch_namespace}},
                )
            ],
        )
        nag.accept(
            policy,
            "AwsSolutions-IAM5[Resource::*]",
            "cloudwatch:PutMetricData supports no resource ARNs; the statement is limited by the "
            "cloudwatch:namespace condition key to the job's own namespace.",
        )
        return policy

    # --- alarms --------------------------------------------------------------------------------------------

    def _topic(self) -> sns.Topic:
        """An encrypted topic, SSL only, with the configured address subscribed (AWS asks it to confirm)."""
        key = kms.Key(
            self,
            "AlarmTopicKey",
            description="Encrypts the pipeline's alarm topic",
            enable_key_rotation=True,
            pending_window=Duration.days(7),
            removal_policy=RemovalPolicy.DESTROY,
        )
        # CloudWatch alarms publish to an encrypted topic only when the key lets CloudWatch use it.
        key.grant(iam.ServicePrincipal("cloudwatch.amazonaws.com"), "kms:Decrypt", "kms:GenerateDataKey*")
        topic = sns.Topic(self, "AlarmTopic", display_name="Kinesis pipeline alarms", master_key=key, enforce_ssl=True)
        topic.add_subscription(subscriptions.EmailSubscription(self.config.alarm_email))
        return topic

    def _alarms(self, source: kinesis.IStream, sink: kinesis.IStream) -> dict[str, cw.Alarm]:
        config = self.config
        lag = dict(evaluation_periods=LAG_MINUTES, datapoints_to_alarm=LAG_MINUTES)
        throttle = dict(
            threshold=1,
            evaluation_periods=THROTTLE_PERIODS,
            datapoints_to_alarm=THROTTLE_PERIODS,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        )
        specs = {
            "IteratorAge": (
                source.metric_get_records_iterator_age_milliseconds(statistic="Maximum", period=ONE_MINUTE),
                dict(threshold=config.iterator_age_alarm_ms, **lag),
                f"The oldest record read from {config.source_stream_name} was more than "
                f"{config.iterator_age_alarm_ms} ms old for {LAG_MINUTES} minutes: the job falls behind.",
            ),
            "PublishedLag": (
                self.job_metric("MaxMillisBehindLatest", "Maximum"),
                dict(threshold=config.lag_alarm_ms, **lag),
                f"The job {self.job} reported more than {config.lag_alarm_ms} ms behind the tip of a shard for "
                f"{LAG_MINUTES} minutes (published by pyspark 4.2+ only; EMR's Spark 4.0 publishes no lag).",
            ),
            "SourceReadThrottled": (
                source.metric_read_provisioned_throughput_exceeded(statistic="Sum", period=FIVE_MINUTES),
                throttle,
                f"Reads of {config.source_stream_name} were throttled for {5 * THROTTLE_PERIODS} minutes.",
            ),
            "SourceWriteThrottled": (
                source.metric_write_provisioned_throughput_exceeded(statistic="Sum", period=FIVE_MINUTES),
                throttle,
                f"Writes to {config.source_stream_name} were throttled for {5 * THROTTLE_PERIODS} minutes.",
            ),
            "SinkWriteThrottled": (
                sink.metric_write_provisioned_throughput_exceeded(statistic="Sum", period=FIVE_MINUTES),
                throttle,
                f"Writes to {config.sink_stream_name} were throttled for {5 * THROTTLE_PERIODS} minutes.",
            ),
        }
        alarms = {}
        for name, (metric, settings, description) in specs.items():
            alarm = cw.Alarm(
                self,
                f"{name}Alarm",
                metric=metric,
                alarm_name=f"{config.stack_prefix}-{name}",
                alarm_description=description,
                # No data = nobody reads/writes/publishes (stopped job, idle stream): not an incident by itself.
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                **settings,
            )
            if self.topic is not None:
                alarm.add_alarm_action(cw_actions.SnsAction(self.topic))
            alarms[name] = alarm
        return alarms

    # --- dashboard -----------------------------------------------------------------------------------------

    def _dashboard(self, source: kinesis.IStream, sink: kinesis.IStream) -> cw.Dashboard:
        config = self.config
        sum_5m = {"statistic": "Sum", "period": FIVE_MINUTES}
        dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=f"{config.stack_prefix}-pipeline")
        dashboard.add_widgets(
            cw.GraphWidget(
                title="Source: GetRecords.IteratorAgeMilliseconds (max)",
                left=[source.metric_get_records_iterator_age_milliseconds(statistic="Maximum", period=ONE_MINUTE)],
                left_annotations=[cw.HorizontalAnnotation(value=config.iterator_age_alarm_ms, label="alarm")],
                width=12,
            ),
            cw.GraphWidget(
                title=f"Job {self.job}: published lag, ms behind latest (max)",
                left=[
                    self.job_metric("MaxMillisBehindLatest", "Maximum"),
                    self.job_search("AvgMillisBehindLatest", "Average", "average over shards, per source", True),
                ],
                left_annotations=[cw.HorizontalAnnotation(value=config.lag_alarm_ms, label="alarm")],
                width=12,
            ),
            cw.GraphWidget(
                title=f"Job {self.job}: rows per second, per query",
                left=[
                    self.job_search("InputRowsPerSecond", "Average", "input"),
                    self.job_search("ProcessedRowsPerSecond", "Average", "processed"),
                ],
                width=12,
            ),
            cw.GraphWidget(
                title="Incoming records (sum per 5 minutes)",
                left=[source.metric_incoming_records(**sum_5m), sink.metric_incoming_records(**sum_5m)],
                width=12,
            ),
            cw.GraphWidget(
                title="ProvisionedThroughputExceeded (sum per 5 minutes)",
                left=[
                    source.metric_read_provisioned_throughput_exceeded(label="source read", **sum_5m),
                    source.metric_write_provisioned_throughput_exceeded(label="source write", **sum_5m),
                    sink.metric_write_provisioned_throughput_exceeded(label="sink write", **sum_5m),
                ],
                width=24,
            ),
        )
        return dashboard
