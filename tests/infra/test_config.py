"""Context validation: defaults, string values from `-c`, and errors that name key, value and what is allowed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.config import ConfigError, InfraConfig

ROOT = Path(__file__).resolve().parents[2]


def load(context: dict, environ: dict | None = None) -> InfraConfig:
    return InfraConfig.from_context(context.get, environ or {})


def test_defaults_are_the_cdk_json_values():
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    assert load(context) == InfraConfig()
    assert load({}) == InfraConfig()


def test_cli_strings_are_parsed():
    config = load(
        {
            "sourceShards": "4",
            "coreInstanceCount": "0",
            "streamMode": "on-demand",
            "submitCountryCounts": "false",
            "consumerAccountId": "210987654321",
            "externalId": "0123456789abcdef",
        }
    )
    assert (config.source_shards, config.core_instance_count, config.stream_mode) == (4, 0, "ON_DEMAND")
    assert config.on_demand and config.cross_account and not config.submit_country_counts


def test_sharing_by_resource_policy_and_the_record_and_warm_settings_are_parsed():
    config = load(
        {
            "consumerAccountId": "210987654321",
            "crossAccountAccess": "resourcePolicy",
            "streamMode": "ON_DEMAND",
            "maxRecordSizeKiB": "4096",
            "warmThroughputMiBps": 50,
        }
    )
    assert config.cross_account and not config.cross_account_role and config.shared_consumers == ()
    assert (config.max_record_size_kib, config.warm_throughput_mibps) == (4096, 50)
    shared = load(
        {"consumerAccountId": "210987654321", "crossAccountAccess": "resourcePolicy", "sharedConsumers": "a, b.2"}
    )
    assert shared.shared_consumers == ("a", "b.2")
    assert load({"consumerAccountId": "210987654321", "externalId": "x" * 16}).cross_account_role


def test_monitoring_settings_are_parsed():
    config = load({"lagAlarmMs": "60000", "iteratorAgeAlarmMs": "120000", "alarmEmail": "ops@example.com"})
    assert (config.lag_alarm_ms, config.iterator_age_alarm_ms, config.alarm_email) == (60000, 120000, "ops@example.com")
    assert load({"cloudwatchNamespace": "Team/Jobs"}).cloudwatch_namespace == "Team/Jobs"


def test_account_and_region_fall_back_to_the_cli_environment():
    config = load({}, {"CDK_DEFAULT_ACCOUNT": "111122223333", "CDK_DEFAULT_REGION": "eu-central-1"})
    assert (config.account, config.region) == ("111122223333", "eu-central-1")
    assert load({"region": "us-west-2"}, {"CDK_DEFAULT_REGION": "eu-central-1"}).region == "us-west-2"


def test_every_problem_is_reported_at_once():
    with pytest.raises(ConfigError) as error:
        load({"sourceShards": "zero", "streamMode": "burst", "sinkShards": 0, "account": "12345"})
    message = str(error.value)
    assert "context 'sourceShards': got 'zero'; allowed: an integer from 1 to 500" in message
    assert "context 'streamMode': got 'burst'; allowed: PROVISIONED or ON_DEMAND" in message
    assert "context 'sinkShards': got 0; allowed: an integer from 1 to 500" in message
    assert "context 'account': got '12345'; allowed: 12 digits" in message


@pytest.mark.parametrize("label", ["emr-7.9.0", "emr-6.15.0", "emr-spark-7.0.0", "spark-8"])
def test_release_labels_without_spark_4_are_refused(label):
    with pytest.raises(ConfigError, match=f"'releaseLabel': got '{label}'.*Spark 3.5"):
        load({"releaseLabel": label})


def test_newer_emr_spark_releases_are_accepted():
    assert load({"releaseLabel": "emr-spark-8.1.0"}).release_label == "emr-spark-8.1.0"


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        ({"consumerAccountId": "210987654321"}, "'externalId' is required when 'consumerAccountId' is set"),
        ({"externalId": "0123456789abcdef"}, "'consumerAccountId' is required when 'externalId' is set"),
        ({"consumerAccountId": "2109", "externalId": "0123456789abcdef"}, "'consumerAccountId': got '2109'"),
        ({"sourceStreamName": "same", "sinkStreamName": "same"}, "they must differ"),
        ({"sourceShards": True}, "'sourceShards': got True"),
        ({"submitCountryCounts": "yes"}, "'submitCountryCounts': got 'yes'; allowed: true or false"),
        ({"subnetId": "sn-1"}, "'subnetId': got 'sn-1'"),
        ({"tlsCertificatesS3Uri": "s3://bucket/certs.tar"}, "'tlsCertificatesS3Uri'"),
        ({"primaryInstanceType": "large"}, "'primaryInstanceType': got 'large'"),
        ({"idleTimeoutSeconds": "10"}, "'idleTimeoutSeconds': got '10'; allowed: an integer from 60 to 604800"),
        ({"cloudwatchNamespace": "AWS/Kinesis"}, "'cloudwatchNamespace': got 'AWS/Kinesis'"),
        ({"lagAlarmMs": "5"}, "'lagAlarmMs': got '5'; allowed: an integer from 1000 to 604800000"),
        ({"iteratorAgeAlarmMs": "soon"}, "'iteratorAgeAlarmMs': got 'soon'"),
        ({"alarmEmail": "ops"}, "'alarmEmail': got 'ops'; allowed: an e-mail address"),
        ({"pythonExecutable": "python3"}, "'pythonExecutable': got 'python3'; allowed: python3.11 or an absolute path"),
        ({"pythonExecutable": "/usr/bin/python3.12"}, "'pythonExecutable': got '/usr/bin/python3.12'"),
        ({"serverless": "maybe"}, "'serverless': got 'maybe'; allowed: true or false"),
        ({"serverlessMaxVcpu": "2"}, "'serverlessMaxVcpu': got '2'; allowed: an integer from 4 to 400"),
        ({"crossAccountAccess": "resourcePolicy"}, "'consumerAccountId' is required when 'crossAccountAccess' is set"),
        (
            {"consumerAccountId": "210987654321", "crossAccountAccess": "share"},
            "'crossAccountAccess': got 'share'; allowed: ROLE or RESOURCE_POLICY",
        ),
        (
            {"consumerAccountId": "210987654321", "crossAccountAccess": "resourcePolicy", "externalId": "x" * 16},
            "'externalId' is for crossAccountAccess=role: a resource policy takes none",
        ),
        (
            {"consumerAccountId": "210987654321", "externalId": "x" * 16, "sharedConsumers": "jobs"},
            "'sharedConsumers' is for crossAccountAccess=resourcePolicy",
        ),
        ({"sharedConsumers": "a,a"}, "'sharedConsumers': got 'a,a'; allowed: comma-separated consumer names"),
        (
            {"sharedConsumers": "a b"},
            "'sharedConsumers': got 'a b'; allowed: comma-separated consumer names, each 1-115",
        ),
        ({"sharedConsumers": ",".join(f"c{i}" for i in range(21))}, "'sharedConsumers': got 'c0,c1,c2"),
        ({"maxRecordSizeKiB": "1000"}, "'maxRecordSizeKiB': got '1000'; allowed: an integer from 1024 to 10240"),
        ({"warmThroughputMiBps": "100"}, "'warmThroughputMiBps' is for on-demand streams"),
        (
            {"streamMode": "ON_DEMAND", "warmThroughputMiBps": "0"},
            "'warmThroughputMiBps': got '0'; allowed: an integer from 1 to 10240",
        ),
    ],
)
def test_bad_values_are_named(context, expected):
    with pytest.raises(ConfigError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        load(context)


@pytest.mark.parametrize("external_id", ["secret-42", "x" * 15, "x" * 1225, "sixteen chars ok"])
def test_external_ids_need_16_to_1224_safe_characters_and_are_never_echoed(external_id):
    with pytest.raises(ConfigError) as error:
        load({"consumerAccountId": "210987654321", "externalId": external_id})
    message = str(error.value)
    assert f"context 'externalId': got {len(external_id)} characters (value not shown); allowed: 16-1224" in message
    assert external_id not in message


def test_external_id_of_16_characters_is_accepted():
    config = load({"consumerAccountId": "210987654321", "externalId": "AbC_-+=,.@:/0123"})
    assert config.external_id == "AbC_-+=,.@:/0123"


def test_app_reports_config_errors_and_exits_2(capsys):
    import app

    assert app.main({"sourceShards": "-1"}) == 2
    assert "context 'sourceShards': got '-1'" in capsys.readouterr().err
