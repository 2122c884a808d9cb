"""What a query prints about secrets: ``kinesis.stsExternalId`` is redacted in Spark's plans (explain()) once the
source is registered. The options' own checks: tests/connector/options/test_registry.py."""

from __future__ import annotations

import pytest

import pyspark_aws_kinesis
from tests.connector.support.redaction_util import EXTERNAL_ID


def test_explain_redacts_the_external_id(spark, capsys: pytest.CaptureFixture[str]) -> None:
    spark.conf.unset(pyspark_aws_kinesis.OPTIONS_REDACTION)  # Spark's default: "(?i)url"
    pyspark_aws_kinesis.register(spark)
    options = {
        "kinesis.streamName": "s",
        "kinesis.region": "us-east-1",
        "kinesis.stsRoleArn": "arn:aws:iam::123456789012:role/reader",
        "kinesis.stsExternalId": EXTERNAL_ID,
        "kinesis.endpointUrl": "http://127.0.0.1:4567",
    }
    spark.readStream.format("aws-kinesis").options(**options).load().explain(True)
    plan = capsys.readouterr().out
    assert "kinesis.stsExternalId=*********(redacted)" in plan, plan
    assert EXTERNAL_ID not in plan and "127.0.0.1:4567" not in plan
    pyspark_aws_kinesis.register(spark)  # again: the conf is widened once
    assert spark.conf.get(pyspark_aws_kinesis.OPTIONS_REDACTION).lower().count("externalid") == 1
