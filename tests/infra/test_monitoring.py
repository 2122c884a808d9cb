"""Template assertions for the monitoring stack: dashboard, alarms and their thresholds, the optional alarm
topic, the instance role's PutMetricData limited to the job's namespace, and the step's --cloudwatch-namespace."""

from __future__ import annotations

import json

from aws_cdk.assertions import Template

from tests.infra.cfn import logical_id, render, resources_of_type
from tests.infra.conftest import ALARM_EMAIL

KINESIS_METRICS = (
    "GetRecords.IteratorAgeMilliseconds",
    "ReadProvisionedThroughputExceeded",
    "WriteProvisionedThroughputExceeded",
    "IncomingRecords",
)
JOB_METRICS = ("MaxMillisBehindLatest", "AvgMillisBehindLatest", "InputRowsPerSecond", "ProcessedRowsPerSecond")


def _alarms(template: dict) -> dict[str, dict]:
    """Alarm properties by the alarm's name suffix (IteratorAge, PublishedLag, ...)."""
    alarms = resources_of_type(template, "AWS::CloudWatch::Alarm").values()
    return {a["Properties"]["AlarmName"].rsplit("-", 1)[1]: a["Properties"] for a in alarms}


def test_dashboard_shows_the_stream_metrics_and_the_jobs_lag_and_rows(cfn, pipeline):
    (dashboard,) = resources_of_type(cfn["monitoring"], "AWS::CloudWatch::Dashboard").values()
    body = render(dashboard["Properties"]["DashboardBody"])
    metrics = [m for w in json.loads(body)["widgets"] for m in w["properties"]["metrics"]]
    source = f"<import {pipeline.streams.stack_name}:ExportsOutputRef{logical_id(pipeline.streams.source)}"
    sink = f"<import {pipeline.streams.stack_name}:ExportsOutputRef{logical_id(pipeline.streams.sink)}"
    kinesis = [(m[1], m[3]) for m in metrics if m[0] == "AWS/Kinesis"]

    def shown(name: str, stream: str) -> bool:
        return any(n == name and value.startswith(stream) for n, value in kinesis)

    for name in KINESIS_METRICS:
        assert shown(name, source), name
    assert shown("WriteProvisionedThroughputExceeded", sink) and shown("IncomingRecords", sink)
    job = json.dumps([m for m in metrics if m[0] != "AWS/Kinesis"])
    for name in JOB_METRICS:
        assert name in job, name
    assert ["KinesisSpark", "MaxMillisBehindLatest", "Job", "country_counts"] in [m[:4] for m in metrics]
    assert 'Job=\\"country_counts\\"' in job


def test_alarms_watch_iterator_age_published_lag_and_throttling_and_notify_the_topic(cfn, pipeline):
    alarms = _alarms(cfn["monitoring"])
    assert set(alarms) == {
        "IteratorAge",
        "PublishedLag",
        "SourceReadThrottled",
        "SourceWriteThrottled",
        "SinkWriteThrottled",
    }
    age, lag = alarms["IteratorAge"], alarms["PublishedLag"]
    assert (age["Namespace"], age["MetricName"], age["Statistic"]) == (
        "AWS/Kinesis",
        "GetRecords.IteratorAgeMilliseconds",
        "Maximum",
    )
    assert (lag["Namespace"], lag["MetricName"], lag["Dimensions"]) == (
        "KinesisSpark",
        "MaxMillisBehindLatest",
        [{"Name": "Job", "Value": "country_counts"}],
    )
    assert age["Threshold"] == lag["Threshold"] == 300000  # cdk.json's defaults
    assert alarms["SourceReadThrottled"]["MetricName"] == "ReadProvisionedThroughputExceeded"
    assert alarms["SinkWriteThrottled"]["MetricName"] == "WriteProvisionedThroughputExceeded"
    topic = logical_id(pipeline.monitoring.topic)
    for name, alarm in alarms.items():
        assert alarm["ComparisonOperator"].startswith("GreaterThan"), name
        assert alarm["TreatMissingData"] == "notBreaching", name
        assert alarm["AlarmActions"] == [{"Ref": topic}], name


def test_the_topic_is_encrypted_ssl_only_and_mails_the_configured_address(templates, cfn, pipeline):
    key = logical_id(pipeline.monitoring.topic.master_key)
    templates["monitoring"].has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": {"Fn::GetAtt": [key, "Arn"]}})
    templates["monitoring"].has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": ALARM_EMAIL}
    )
    (topic_policy,) = resources_of_type(cfn["monitoring"], "AWS::SNS::TopicPolicy").values()
    (deny,) = topic_policy["Properties"]["PolicyDocument"]["Statement"]
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    key_policy = cfn["monitoring"]["Resources"][key]["Properties"]["KeyPolicy"]["Statement"]
    cloudwatch = [s for s in key_policy if s["Principal"] == {"Service": "cloudwatch.amazonaws.com"}]
    assert cloudwatch and set(cloudwatch[0]["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey*"}


def test_without_an_address_there_is_no_topic_and_thresholds_come_from_context(variant):
    template = Template.from_stack(variant.monitoring).to_json()
    assert variant.monitoring.topic is None
    assert not resources_of_type(template, "AWS::SNS::Topic")
    alarms = _alarms(template)
    assert alarms["IteratorAge"]["Threshold"] == 120000
    assert alarms["PublishedLag"]["Threshold"] == 60000
    assert alarms["PublishedLag"]["Namespace"] == "Team/Jobs"
    assert all("AlarmActions" not in alarm for alarm in alarms.values())


def test_job_roles_may_put_metrics_only_in_the_jobs_namespace(cfn, pipeline):
    """The cluster's instance role and (with serverless=true) the Serverless job role, nobody else."""
    (policy,) = resources_of_type(cfn["monitoring"], "AWS::IAM::Policy").values()
    properties = policy["Properties"]
    roles = [render(role) for role in properties["Roles"]]
    expected = [pipeline.access.instance_role, pipeline.access.serverless_job_role]
    assert len(roles) == len(expected)
    for role, construct in zip(roles, expected, strict=True):
        assert role.startswith(f"<import {pipeline.access.stack_name}:ExportsOutputRef{logical_id(construct)}")
    (statement,) = properties["PolicyDocument"]["Statement"]
    assert statement == {
        "Sid": "PutJobMetrics",
        "Effect": "Allow",
        "Action": "cloudwatch:PutMetricData",
        "Resource": "*",
        "Condition": {"StringEquals": {"cloudwatch:namespace": "KinesisSpark"}},
    }


def test_the_step_publishes_to_the_namespace_and_runs_after_the_permission(cfn, pipeline):
    (step,) = resources_of_type(cfn["emr"], "AWS::EMR::Step").values()
    args = [render(a) for a in step["Properties"]["HadoopJarStep"]["Args"]]
    assert args[args.index("--cloudwatch-namespace") + 1] == "KinesisSpark"
    assert pipeline.monitoring in pipeline.emr.dependencies
