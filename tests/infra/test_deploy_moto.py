"""Deploy the synthesized data and access stacks into moto's CloudFormation, then look at the resources
themselves (moto reports some types as created without creating them).

What is filtered out of the templates, and why:
- `Parameters.BootstrapVersion` and `Rules.CheckBootstrapVersion`: they read the CDK bootstrap version from SSM,
  which `cdk bootstrap` writes in a real account and nothing writes in moto.
- `AWS::S3::BucketPolicy` (the SSL-only policy): moto's CloudFormation has no such type; the template test
  asserts the policy instead.
- `Tags` of `AWS::KMS::Key`: moto 5.2.5 hands CloudFormation's `Key`/`Value` tags to its KMS tagger, which
  expects `TagKey`/`TagValue`, fails with KeyError and then reports the key as an undefined resource.
Applied by the template tests only, because moto's CloudFormation accepts but ignores them: the bucket's public
access block and lifecycle rules, and the service role's AWS-managed policy; moto's describe_key also fails on
a key created from a template, so the key is found with list_keys.
The EMR stack is not deployed: moto accepts its cluster but runs nothing, and its assets need the CDK bootstrap
bucket; tests/infra/test_submit_step.py covers the EMR API against moto instead.
"""

from __future__ import annotations

import ast
import time

import pytest

from tests.infra.conftest import REGION

DEPLOYED = ["streams", "metadata", "storage", "access"]
UNSUPPORTED_TYPES = {"AWS::S3::BucketPolicy"}


def deployable(template: dict) -> dict:
    template = {k: v for k, v in template.items() if k != "Rules"}
    template["Parameters"] = {k: v for k, v in template.get("Parameters", {}).items() if k != "BootstrapVersion"}
    resources = {}
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] in UNSUPPORTED_TYPES:
            continue
        if resource["Type"] == "AWS::KMS::Key":
            properties = {k: v for k, v in resource["Properties"].items() if k != "Tags"}
            resource = {**resource, "Properties": properties}
        resources[logical_id] = resource
    template["Resources"] = resources
    return template


def wait_for_stack(cloudformation, name: str, timeout_s: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        (stack,) = cloudformation.describe_stacks(StackName=name)["Stacks"]
        if not stack["StackStatus"].endswith("IN_PROGRESS"):
            return stack
        assert time.monotonic() < deadline, f"{name} still {stack['StackStatus']}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def deployed(moto, pipeline, cfn) -> dict[str, dict[str, str]]:
    """Create the four stacks in dependency order; return each stack's outputs."""
    import json

    cloudformation = moto.client("cloudformation", region=REGION)
    outputs = {}
    for name in DEPLOYED:
        stack_name = getattr(pipeline, name).stack_name
        cloudformation.create_stack(
            StackName=stack_name,
            TemplateBody=json.dumps(deployable(cfn[name])),
            Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"],
        )
        stack = wait_for_stack(cloudformation, stack_name)
        assert stack["StackStatus"] == "CREATE_COMPLETE", stack.get("StackStatusReason")
        outputs[name] = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    return outputs


def test_streams_exist_with_their_shards(moto, deployed, names):
    kinesis = moto.client("kinesis", region=REGION)
    for output, name, shards in (
        ("SourceStreamName", names["sourceStreamName"], 2),
        ("SinkStreamName", names["sinkStreamName"], 1),
    ):
        assert deployed["streams"][output] == name
        summary = kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]
        assert summary["StreamStatus"] == "ACTIVE"
        assert summary["OpenShardCount"] == shards
        assert summary["StreamARN"] == deployed["streams"][output.replace("Name", "Arn")]


def test_stream_key_exists_and_rotates(moto, deployed):
    kms = moto.client("kms", region=REGION)
    key_arn = deployed["streams"]["StreamKeyArn"]
    # Not describe_key: moto keeps the template's KeyPolicy object and fails to json-decode it (500).
    assert key_arn in [key["KeyArn"] for key in kms.list_keys()["Keys"]]
    assert kms.get_key_rotation_status(KeyId=key_arn)["KeyRotationEnabled"] is True


def test_metadata_table_exists_with_the_connector_keys(moto, deployed):
    dynamodb = moto.client("dynamodb", region=REGION)
    table = dynamodb.describe_table(TableName=deployed["metadata"]["MetadataTableName"])["Table"]
    assert table["TableArn"] == deployed["metadata"]["MetadataTableArn"]
    assert {k["AttributeName"]: k["KeyType"] for k in table["KeySchema"]} == {"sourceId": "HASH", "batchShard": "RANGE"}
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    # The table takes the connector's conditional writes.
    dynamodb.put_item(
        TableName=table["TableName"],
        Item={"sourceId": {"S": "s-1"}, "batchShard": {"S": "0#shardId-0"}, "expiresAt": {"N": "1"}},
        ConditionExpression="attribute_not_exists(sourceId)",
    )


def test_bucket_exists_encrypted(moto, deployed):
    # moto's CloudFormation applies only BucketEncryption and Tags of an S3::Bucket; the public access block and
    # the lifecycle rules are asserted in the template tests.
    s3 = moto.client("s3", region=REGION)
    bucket = deployed["storage"]["BucketName"]
    s3.head_bucket(Bucket=bucket)
    rules = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"]
    assert rules[0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    assert deployed["storage"]["BucketArn"] == f"arn:aws:s3:::{bucket}"


def test_roles_and_instance_profile_exist_with_their_policies(moto, deployed):
    iam = moto.client("iam", region=REGION)
    access = deployed["access"]
    roles = {
        key: iam.get_role(RoleName=access[key].rsplit("/", 1)[1])["Role"]
        for key in ("EmrInstanceRoleArn", "EmrServiceRoleArn", "CrossAccountRoleArn")
    }
    assert {key: role["Arn"] for key, role in roles.items()} == {key: access[key] for key in roles}
    instance_role = roles["EmrInstanceRoleArn"]["RoleName"]
    document = iam.get_role_policy(RoleName=instance_role, PolicyName="pipeline")["PolicyDocument"]
    if isinstance(document, str):  # moto stores a CloudFormation inline policy as its Python repr
        document = ast.literal_eval(document)
    sids = [statement["Sid"] for statement in document["Statement"]]
    assert "Streams" in sids and "MetadataTable" in sids
    streams = next(s for s in document["Statement"] if s["Sid"] == "Streams")
    assert sorted(streams["Resource"]) == sorted(
        [deployed["streams"]["SourceStreamArn"], deployed["streams"]["SinkStreamArn"]]
    )
    profile_name = access["EmrInstanceProfileArn"].rsplit("/", 1)[1]
    profile = iam.get_instance_profile(InstanceProfileName=profile_name)["InstanceProfile"]
    assert [role["RoleName"] for role in profile["Roles"]] == [instance_role]
    # The service role's AWS-managed policy is not attached by moto's CloudFormation; the template test has it.


def test_cross_account_role_trusts_the_consumer_with_the_external_id(moto, deployed):
    from tests.infra.conftest import CONSUMER_ACCOUNT, EXTERNAL_ID

    iam = moto.client("iam", region=REGION)
    role = iam.get_role(RoleName=deployed["access"]["CrossAccountRoleArn"].rsplit("/", 1)[1])["Role"]
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"]["AWS"] == f"arn:aws:iam::{CONSUMER_ACCOUNT}:root"
    assert trust["Condition"] == {"StringEquals": {"sts:ExternalId": EXTERNAL_ID}}


def test_consumer_reads_the_source_stream_through_the_cross_account_role(moto, deployed, tmp_path):
    """The consumer account's job: its own keys, the stack's CrossAccountRoleArn and external ID as connector
    options; every Kinesis call signed with the keys moto's STS returned for that role (docs/infra.md)."""
    from localaws.fault_proxy import FaultProxy
    from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY
    from localaws.streams import put_records
    from pyspark_aws_kinesis.source.stream_reader import KinesisStreamReader
    from tests.infra.conftest import EXTERNAL_ID

    role_arn, stream = deployed["access"]["CrossAccountRoleArn"], deployed["streams"]["SourceStreamName"]
    sent = [f"event-{i}".encode() for i in range(20)]
    put_records(moto.client("kinesis", region=REGION), stream, [(data, f"k{i}") for i, data in enumerate(sent)])
    with FaultProxy(moto.endpoint_url, record=True) as proxy:
        options = {
            "kinesis.streamName": stream,
            "kinesis.region": REGION,
            "kinesis.endpointUrl": proxy.endpoint_url,
            "kinesis.awsAccessKeyId": DUMMY_ACCESS_KEY,  # the consumer account's own credentials
            "kinesis.awsSecretKey": DUMMY_SECRET_KEY,
            "kinesis.stsRoleArn": role_arn,
            "kinesis.stsExternalId": EXTERNAL_ID,
            "kinesis.stsEndpointUrl": proxy.endpoint_url,
            "kinesis.startingPosition": "TRIM_HORIZON",
            "kinesis.metadataPath": str(tmp_path / "metadata"),
        }
        reader = KinesisStreamReader(None, {key.lower(): value for key, value in options.items()})
        start = reader.initialOffset()
        end = reader.latestOffset(start, None)
        rows = [
            row
            for partition in reader.partitions(start, end)
            for batch in reader.read(partition)
            for row in batch.to_pylist()
        ]
        (assume,) = proxy.requests("AssumeRole")
        kinesis_calls = [call for call in proxy.requests() if call.service == "kinesis"]
    assert sorted(bytes(row["data"]) for row in rows) == sorted(sent)
    assert dict(assume.form)["RoleArn"] == role_arn and dict(assume.form)["ExternalId"] == EXTERNAL_ID
    assert assume.access_key_id == DUMMY_ACCESS_KEY
    assert kinesis_calls and all(call.access_key_id.startswith("ASIA") for call in kinesis_calls)
