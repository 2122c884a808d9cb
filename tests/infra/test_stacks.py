"""Template assertions for every resource of the pipeline, its key properties and every IAM statement."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Match

from tests.infra.cfn import as_list, logical_id, policy_statements, render, resources_of_type
from tests.infra.conftest import ACCOUNT, CONSUMER_ACCOUNT, EXTERNAL_ID, SHARED_CONSUMERS

# --- streams -------------------------------------------------------------------------------------------------


def test_streams_are_provisioned_kms_encrypted_with_the_configured_shards(templates, pipeline, names):
    key_id = logical_id(pipeline.streams.key)
    templates["streams"].resource_count_is("AWS::Kinesis::Stream", 2)
    for name, shards in ((names["sourceStreamName"], 2), (names["sinkStreamName"], 1)):
        templates["streams"].has_resource_properties(
            "AWS::Kinesis::Stream",
            {
                "Name": name,
                "ShardCount": shards,
                "StreamModeDetails": {"StreamMode": "PROVISIONED"},
                "RetentionPeriodHours": 24,
                "StreamEncryption": {"EncryptionType": "KMS", "KeyId": {"Fn::GetAtt": [key_id, "Arn"]}},
            },
        )
    templates["streams"].has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True, "PendingWindowInDays": 7})


def test_on_demand_streams_have_no_shard_count(variant):
    from aws_cdk.assertions import Template

    streams = Template.from_stack(variant.streams).find_resources("AWS::Kinesis::Stream")
    assert len(streams) == 2
    for stream in streams.values():
        assert stream["Properties"]["StreamModeDetails"] == {"StreamMode": "ON_DEMAND"}
        assert "ShardCount" not in stream["Properties"]


# --- metadata ------------------------------------------------------------------------------------------------


def test_metadata_table_matches_the_connector_layout(templates):
    templates["metadata"].resource_count_is("AWS::DynamoDB::GlobalTable", 0)
    templates["metadata"].has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "KeySchema": [
                {"AttributeName": "sourceId", "KeyType": "HASH"},
                {"AttributeName": "batchShard", "KeyType": "RANGE"},
            ],
            "AttributeDefinitions": Match.array_with(
                [
                    {"AttributeName": "sourceId", "AttributeType": "S"},
                    {"AttributeName": "batchShard", "AttributeType": "S"},
                ]
            ),
            "BillingMode": "PAY_PER_REQUEST",
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            "SSESpecification": {"SSEEnabled": True},
            "TimeToLiveSpecification": {"AttributeName": "expiresAt", "Enabled": True},
        },
    )


# --- storage -------------------------------------------------------------------------------------------------


def test_bucket_is_private_encrypted_and_expires_logs(templates):
    templates["storage"].has_resource_properties(
        "AWS::S3::Bucket",
        {
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
            },
            "LifecycleConfiguration": {
                "Rules": Match.array_with(
                    [
                        Match.object_like({"Prefix": "logs/", "ExpirationInDays": 30, "Status": "Enabled"}),
                        Match.object_like({"AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}}),
                    ]
                )
            },
        },
    )


def test_bucket_is_versioned_and_old_versions_expire(cfn):
    """A deleted or overwritten checkpoint or stop marker can be restored for a week; after that the noncurrent
    versions (Spark rewrites checkpoint files all the time) and the bare delete markers go, so cost stays bounded."""
    (bucket,) = resources_of_type(cfn["storage"], "AWS::S3::Bucket").values()
    props = bucket["Properties"]
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    rules = {rule["Id"]: rule for rule in props["LifecycleConfiguration"]["Rules"]}
    noncurrent = rules["expire-noncurrent-versions"]
    assert noncurrent["Status"] == "Enabled" and "Prefix" not in noncurrent  # every prefix
    assert noncurrent["NoncurrentVersionExpiration"] == {"NoncurrentDays": 7}
    assert rules["remove-expired-delete-markers"]["ExpiredObjectDeleteMarker"] is True


def test_bucket_policy_denies_plain_http(templates):
    templates["storage"].has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Action": "s3:*",
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                            }
                        )
                    ]
                )
            }
        },
    )


def test_cluster_disk_key_rotates(templates):
    templates["storage"].has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})


# --- access --------------------------------------------------------------------------------------------------


def _expected_connector(pipeline) -> dict[str, tuple[list[str], list[str]]]:
    """Sid -> (actions, rendered resources). Resources name the exact logical ids of our own resources."""
    source, sink = (f"FnGetAtt{logical_id(s)}Arn" for s in (pipeline.streams.source, pipeline.streams.sink))
    key = f"FnGetAtt{logical_id(pipeline.streams.key)}Arn"
    bucket = f"FnGetAtt{logical_id(pipeline.storage.bucket)}Arn"
    return {
        "Streams": (
            [
                "kinesis:DescribeStreamSummary",
                "kinesis:ListShards",
                "kinesis:GetShardIterator",
                "kinesis:GetRecords",
                "kinesis:RegisterStreamConsumer",
                "kinesis:ListStreamConsumers",
                "kinesis:PutRecord",
                "kinesis:PutRecords",
            ],
            [source, sink],
        ),
        "StreamConsumers": (
            ["kinesis:DescribeStreamConsumer", "kinesis:SubscribeToShard", "kinesis:DeregisterStreamConsumer"],
            [f"{source}/consumer/*", f"{sink}/consumer/*"],
        ),
        "StreamKey": (["kms:Decrypt", "kms:GenerateDataKey"], [key]),
        "ListBucket": (["s3:ListBucket"], [bucket]),
        "StateObjects": (
            ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
            [f"{bucket}/checkpoints/*", f"{bucket}/metadata/*", f"{bucket}/markers/*"],
        ),
    }


def _statements_by_sid(cfn: dict, role_construct) -> dict[str, dict]:
    role_id = logical_id(role_construct)
    return {s["Sid"]: s for lid, s in policy_statements(cfn) if lid == role_id}


def _assert_statement(statement: dict, actions: list[str], resources: list[str]) -> None:
    assert statement["Effect"] == "Allow"
    assert as_list(statement["Action"]) == actions
    rendered = [render(r) for r in as_list(statement["Resource"])]
    assert len(rendered) == len(resources), rendered
    for got, expected in zip(rendered, resources, strict=True):
        # `<import Stack:ExportsOutputFnGetAtt<id>Arn<hash>>/suffix`: the right resource, the right suffix.
        head, _, suffix = expected.partition("/")
        assert head in got and got.endswith(f"/{suffix}" if suffix else ">"), (got, expected)


def test_instance_role_has_exactly_the_connector_and_emr_statements(cfn, pipeline, recorded_table_actions):
    statements = _statements_by_sid(cfn["access"], pipeline.access.instance_role)
    bucket = f"FnGetAtt{logical_id(pipeline.storage.bucket)}Arn"
    disk_key = f"FnGetAtt{logical_id(pipeline.storage.disk_key)}Arn"
    table = f"FnGetAtt{logical_id(pipeline.metadata.table)}Arn"
    expected = {
        **_expected_connector(pipeline),
        # Exactly what the connector called on the table in a recorded run (tests/infra/metadata_calls.py).
        "MetadataTable": (recorded_table_actions, [table]),
        "EmrLogs": (["s3:PutObject"], [f"{bucket}/logs/*"]),
        "ReadUploads": (["s3:GetObject"], [f"{bucket}/tls/*", f"{bucket}/code/*"]),
        "ClusterDiskKey": (["kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey", "kms:DescribeKey"], [disk_key]),
    }
    assert sorted(statements) == sorted(expected)
    for sid, (actions, resources) in expected.items():
        _assert_statement(statements[sid], actions, resources)
    role = cfn["access"]["Resources"][logical_id(pipeline.access.instance_role)]["Properties"]
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}}
    ]


def test_instance_profile_wraps_the_instance_role(templates, pipeline):
    templates["access"].has_resource_properties(
        "AWS::IAM::InstanceProfile", {"Roles": [{"Ref": logical_id(pipeline.access.instance_role)}]}
    )


def test_service_role_is_emr_only_and_passes_only_the_instance_role(cfn, pipeline):
    role = cfn["access"]["Resources"][logical_id(pipeline.access.service_role)]["Properties"]
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "elasticmapreduce.amazonaws.com"}
    assert trust["Condition"] == {"StringEquals": {"aws:SourceAccount": ACCOUNT}}
    assert [render(arn) for arn in role["ManagedPolicyArns"]] == [
        "arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonEMRServicePolicy_v2"
    ]
    statements = _statements_by_sid(cfn["access"], pipeline.access.service_role)
    assert list(statements) == ["PassInstanceRole"]
    assert statements["PassInstanceRole"]["Action"] == "iam:PassRole"
    assert render(statements["PassInstanceRole"]["Resource"]) == f"<{logical_id(pipeline.access.instance_role)}.Arn>"
    assert statements["PassInstanceRole"]["Condition"] == {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}


def test_cross_account_role_needs_the_external_id_and_may_only_read_the_streams(cfn, pipeline):
    """Read by polling and enhanced fan-out, decrypt; no PutRecord(s), nothing of the owner's bucket (so no forged
    offsets or stop markers), not the metadata table (the connector reaches it with the job's own credentials),
    and consumer-ARN actions only on consumers named with the consumer account's prefix (it can neither take
    over the owner's subscriptions nor deregister the owner's consumers)."""
    role_construct = pipeline.access.cross_account_role
    role = cfn["access"]["Resources"][logical_id(role_construct)]["Properties"]
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert render(trust["Principal"]["AWS"]) == f"arn:<AWS::Partition>:iam::{CONSUMER_ACCOUNT}:root"
    assert trust["Condition"] == {"StringEquals": {"sts:ExternalId": EXTERNAL_ID}}
    assert role["MaxSessionDuration"] == 3600
    source, sink = (f"FnGetAtt{logical_id(s)}Arn" for s in (pipeline.streams.source, pipeline.streams.sink))
    key = f"FnGetAtt{logical_id(pipeline.streams.key)}Arn"
    prefix = f"{CONSUMER_ACCOUNT}-"
    expected = {
        "ReadStreams": (
            [
                "kinesis:DescribeStreamSummary",
                "kinesis:ListShards",
                "kinesis:GetShardIterator",
                "kinesis:GetRecords",
                "kinesis:RegisterStreamConsumer",
                "kinesis:ListStreamConsumers",
            ],
            [source, sink],
        ),
        "OwnConsumers": (
            ["kinesis:DescribeStreamConsumer", "kinesis:SubscribeToShard", "kinesis:DeregisterStreamConsumer"],
            [f"{source}/consumer/{prefix}*", f"{sink}/consumer/{prefix}*"],
        ),
        "DecryptStreams": (["kms:Decrypt"], [key]),
    }
    statements = _statements_by_sid(cfn["access"], role_construct)
    assert sorted(statements) == sorted(expected)
    for sid, (actions, resources) in expected.items():
        _assert_statement(statements[sid], actions, resources)
    granted = [a for s in statements.values() for a in as_list(s["Action"])]
    assert not [a for a in granted if a.startswith("s3:") or a.startswith("dynamodb:") or "Put" in a]


def test_a_resource_policy_instead_of_the_role_lets_the_consumer_account_only_read(variant):
    """crossAccountAccess=resourcePolicy: no role; each stream's policy grants the consumer account the read
    actions and nothing else, and the stream key's policy Decrypt."""
    from aws_cdk.assertions import Template

    assert variant.access.cross_account_role is None
    outputs = json.dumps(variant.app.synth().get_stack_by_name(variant.access.stack_name).template["Outputs"])
    assert "CrossAccountRoleArn" not in outputs
    template = Template.from_stack(variant.streams).to_json()
    policies = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::Kinesis::ResourcePolicy"]
    streams = {f"<{logical_id(s)}.Arn>" for s in (variant.streams.source, variant.streams.sink)}
    stream_policies = [policy for policy in policies if render(policy["ResourceArn"]) in streams]
    assert {render(policy["ResourceArn"]) for policy in stream_policies} == streams
    for policy in stream_policies:
        (statement,) = policy["ResourcePolicy"]["Statement"]
        assert render(statement["Principal"]["AWS"]) == f"arn:<AWS::Partition>:iam::{CONSUMER_ACCOUNT}:root"
        assert statement["Effect"] == "Allow" and render(statement["Resource"]) == render(policy["ResourceArn"])
        assert as_list(statement["Action"]) == [
            "kinesis:DescribeStreamSummary",
            "kinesis:ListShards",
            "kinesis:GetShardIterator",
            "kinesis:GetRecords",
        ]
    key = next(r for r in template["Resources"].values() if r["Type"] == "AWS::KMS::Key")
    granted = [
        s for s in key["Properties"]["KeyPolicy"]["Statement"] if CONSUMER_ACCOUNT in json.dumps(s.get("Principal"))
    ]
    assert [as_list(s["Action"]) for s in granted] == [["kms:Decrypt"]]


def test_shared_consumers_are_registered_for_the_reader_and_shared_for_subscribing_only(variant):
    """sharedConsumers: each name becomes a consumer of the source stream, <consumer account>-<name>, whose own
    policy lets the consumer account describe it and subscribe through it, and nothing else."""
    from aws_cdk.assertions import Template

    resources = Template.from_stack(variant.streams).to_json()["Resources"]
    consumers = {cid: r["Properties"] for cid, r in resources.items() if r["Type"] == "AWS::Kinesis::StreamConsumer"}
    expected = {f"{CONSUMER_ACCOUNT}-{name}" for name in SHARED_CONSUMERS.split(",")}
    assert {props["ConsumerName"] for props in consumers.values()} == expected
    source = f"<{logical_id(variant.streams.source)}.Arn>"
    assert {render(props["StreamARN"]) for props in consumers.values()} == {source}
    policies = {
        render(r["Properties"]["ResourceArn"]): r["Properties"]["ResourcePolicy"]
        for r in resources.values()
        if r["Type"] == "AWS::Kinesis::ResourcePolicy"
    }
    for cid in consumers:
        arn = f"<{cid}.ConsumerARN>"
        (statement,) = policies[arn]["Statement"]
        assert render(statement["Principal"]["AWS"]) == f"arn:<AWS::Partition>:iam::{CONSUMER_ACCOUNT}:root"
        assert statement["Effect"] == "Allow" and render(statement["Resource"]) == arn
        assert as_list(statement["Action"]) == ["kinesis:DescribeStreamConsumer", "kinesis:SubscribeToShard"]
    assert len(policies) == 2 + len(consumers)  # the two streams' and one a consumer


def test_on_demand_streams_take_warm_throughput_and_a_record_size(variant):
    from aws_cdk.assertions import Template

    for stream in Template.from_stack(variant.streams).find_resources("AWS::Kinesis::Stream").values():
        assert stream["Properties"]["WarmThroughputMiBps"] == 200
        assert stream["Properties"]["MaxRecordSizeInKiB"] == 10240


def test_every_arn_a_user_needs_is_an_output(cfn):
    expected = {
        "streams": {"SourceStreamName", "SourceStreamArn", "SinkStreamName", "SinkStreamArn", "StreamKeyArn"},
        "metadata": {"MetadataTableName", "MetadataTableArn"},
        "storage": {"BucketName", "BucketArn", "ClusterDiskKeyArn"},
        "access": {"EmrServiceRoleArn", "EmrInstanceRoleArn", "EmrInstanceProfileArn", "CrossAccountRoleArn"},
        "emr": {"ClusterId", "PyFilesUri", "LogUri"},
    }
    for stack, outputs in expected.items():
        assert outputs <= set(cfn[stack]["Outputs"]), (stack, set(cfn[stack]["Outputs"]))


@pytest.mark.parametrize("stack", ["streams", "metadata", "storage", "access", "emr", "serverless"])
def test_no_policy_statement_has_a_wildcard_action_or_resource(cfn, stack):
    for lid, statement in policy_statements(cfn[stack]):
        for action in as_list(statement["Action"]):
            assert "*" not in action, (lid, statement)
        for resource in as_list(statement["Resource"]):
            assert render(resource) != "*", (lid, statement)


# --- emr -----------------------------------------------------------------------------------------------------


def test_cluster_runs_spark_4_with_security_configuration_logs_and_idle_timeout(cfn, pipeline):
    (cluster,) = resources_of_type(cfn["emr"], "AWS::EMR::Cluster").values()
    props = cluster["Properties"]
    assert props["ReleaseLabel"] == "emr-spark-8.0.0"
    assert props["Applications"] == [{"Name": "Spark"}]
    assert props["SecurityConfiguration"] == {"Ref": logical_id_of_cfn(pipeline.emr.security_configuration)}
    assert render(props["LogUri"]).endswith("/logs/emr/")
    assert props["AutoTerminationPolicy"] == {"IdleTimeout": 3600}
    assert "ExportsOutputRef" + logical_id(pipeline.access.service_role) in render(props["ServiceRole"])
    assert "ExportsOutputRef" + logical_id(pipeline.access.instance_profile) in render(props["JobFlowRole"])
    instances = props["Instances"]
    assert instances["MasterInstanceGroup"] == {"InstanceCount": 1, "InstanceType": "m7g.xlarge", "Market": "ON_DEMAND"}
    assert instances["CoreInstanceGroup"] == {"InstanceCount": 2, "InstanceType": "m7g.xlarge", "Market": "ON_DEMAND"}
    assert instances["KeepJobFlowAliveWhenNoSteps"] is True
    assert "Ec2KeyName" not in instances
    (bootstrap,) = props["BootstrapActions"]
    python, wheelhouse_uri = (render(arg) for arg in bootstrap["ScriptBootstrapAction"]["Args"])
    assert python == "python3.11"  # the interpreter the locked wheels are for
    assert wheelhouse_uri.startswith("s3://") and wheelhouse_uri.endswith(".zip")
    assert wheelhouse_uri.endswith(pipeline.emr.wheelhouse.s3_object_key)
    assert render(bootstrap["ScriptBootstrapAction"]["Path"]).endswith(".sh")


def test_wheelhouse_asset_holds_the_wheel_and_every_locked_wheel_pinned_by_hash(pipeline, templates, stand_in_wheels):
    """What the bootstrap action installs, as staged into the cloud assembly."""
    from pathlib import Path

    from infra import packaging, wheelhouse

    staged = Path(pipeline.app.outdir) / pipeline.emr.wheelhouse.asset_path
    pins = wheelhouse.parse_lock(stand_in_wheels)
    (own,) = staged.glob("pyspark_aws_kinesis-*.whl")
    assert sorted(p.name for p in staged.glob("*.whl")) == sorted([*(pin.filename for pin in pins), own.name])
    lines = (staged / "requirements.txt").read_text().splitlines()[1:]
    assert lines[:-1] == [pin.line() for pin in pins]
    own_pin = f"pyspark-aws-kinesis=={packaging.project_version()} --hash=sha256:{wheelhouse.sha256_of(own)}"
    assert lines[-1] == f"{own_pin}  # {own.name}"


def logical_id_of_cfn(cfn_resource) -> str:
    import aws_cdk as cdk

    stack = cdk.Stack.of(cfn_resource)
    return stack.resolve(stack.get_logical_id(cfn_resource))


def test_cluster_sits_in_a_private_subnet_without_any_internet_route(cfn, pipeline):
    """No internet or NAT gateway, no route to 0.0.0.0/0, no public IPs on launch: the nodes reach AWS only
    through the VPC endpoints (next test)."""
    emr = cfn["emr"]
    assert len(resources_of_type(emr, "AWS::EC2::VPC")) == 1
    for absent in ("AWS::EC2::InternetGateway", "AWS::EC2::NatGateway", "AWS::EC2::EgressOnlyInternetGateway"):
        assert not resources_of_type(emr, absent), absent
    assert not [
        r for r in resources_of_type(emr, "AWS::EC2::Route").values() if "DestinationCidrBlock" in r["Properties"]
    ]
    (subnet_id, subnet), *others = resources_of_type(emr, "AWS::EC2::Subnet").items()
    assert not others
    assert subnet["Properties"].get("MapPublicIpOnLaunch") is False
    assert len(resources_of_type(emr, "AWS::EC2::FlowLog")) == 1
    (cluster,) = resources_of_type(emr, "AWS::EMR::Cluster").values()
    assert cluster["Properties"]["Instances"]["Ec2SubnetId"] == {"Ref": subnet_id}


def test_vpc_endpoints_cover_every_service_the_nodes_call(cfn):
    """Gateway: S3 and DynamoDB (the metadata table). Interface, with private DNS, in the cluster's subnet, behind
    a group that admits only HTTPS from the VPC: Kinesis, STS, KMS, CloudWatch metrics and Logs, EMR."""
    emr = cfn["emr"]
    endpoints = resources_of_type(emr, "AWS::EC2::VPCEndpoint").values()

    def service(endpoint) -> str:
        return render(endpoint["Properties"]["ServiceName"]).rsplit(".", 1)[1]

    gateways = sorted(service(e) for e in endpoints if e["Properties"]["VpcEndpointType"] == "Gateway")
    interfaces = [e for e in endpoints if e["Properties"]["VpcEndpointType"] == "Interface"]
    assert gateways == ["dynamodb", "s3"]
    assert sorted(service(e) for e in interfaces) == sorted(
        ["kinesis-streams", "sts", "kms", "monitoring", "logs", "elasticmapreduce"]
    )
    (group_id,) = resources_of_type(emr, "AWS::EC2::SecurityGroup")
    for endpoint in interfaces:
        assert endpoint["Properties"]["PrivateDnsEnabled"] is True
        assert endpoint["Properties"]["SecurityGroupIds"] == [{"Fn::GetAtt": [group_id, "GroupId"]}]
    group = resources_of_type(emr, "AWS::EC2::SecurityGroup")[group_id]["Properties"]
    (ingress,) = group["SecurityGroupIngress"]
    assert (ingress["CidrIp"], ingress["FromPort"], ingress["ToPort"]) == ("10.40.0.0/16", 443, 443)
    (vpc,) = resources_of_type(emr, "AWS::EC2::VPC").values()
    assert vpc["Properties"]["CidrBlock"] == "10.40.0.0/16"
    assert vpc["Properties"]["EnableDnsSupport"] is True and vpc["Properties"]["EnableDnsHostnames"] is True


def test_security_configuration_requires_imdsv2_with_hop_limit_1(cfn):
    (config,) = resources_of_type(cfn["emr"], "AWS::EMR::SecurityConfiguration").values()
    assert config["Properties"]["SecurityConfiguration"]["InstanceMetadataServiceConfiguration"] == {
        "MinimumInstanceMetadataServiceVersion": 2,
        "HttpPutResponseHopLimit": 1,
    }


def test_security_configuration_encrypts_at_rest_and_in_transit(cfn, pipeline):
    (config,) = resources_of_type(cfn["emr"], "AWS::EMR::SecurityConfiguration").values()
    encryption = config["Properties"]["SecurityConfiguration"]["EncryptionConfiguration"]
    assert encryption["EnableAtRestEncryption"] is True
    assert encryption["EnableInTransitEncryption"] is True
    at_rest = encryption["AtRestEncryptionConfiguration"]
    assert at_rest["S3EncryptionConfiguration"] == {"EncryptionMode": "SSE-S3"}
    assert at_rest["LocalDiskEncryptionConfiguration"]["EncryptionKeyProviderType"] == "AwsKms"
    assert f"FnGetAtt{logical_id(pipeline.storage.disk_key)}Arn" in render(
        at_rest["LocalDiskEncryptionConfiguration"]["AwsKmsKey"]
    )
    tls = encryption["InTransitEncryptionConfiguration"]["TLSCertificateConfiguration"]
    assert tls["CertificateProviderType"] == "PEM"
    assert render(tls["S3Object"]).endswith("/tls/emr-certs.zip")


def test_step_spark_submits_country_counts_with_the_jobs_zip(cfn, pipeline, names):
    (step,) = resources_of_type(cfn["emr"], "AWS::EMR::Step").values()
    props = step["Properties"]
    assert props["JobFlowId"] == {"Ref": logical_id_of_cfn(pipeline.emr.cluster)}
    assert props["ActionOnFailure"] == "CONTINUE"
    assert props["HadoopJarStep"]["Jar"] == "command-runner.jar"
    args = [render(a) for a in props["HadoopJarStep"]["Args"]]
    bucket = f"<import {pipeline.storage.stack_name}:ExportsOutputRef{logical_id(pipeline.storage.bucket)}"
    assert args[:7] == [
        "spark-submit",
        "--deploy-mode",
        "cluster",
        "--conf",
        "spark.pyspark.python=python3.11",
        "--conf",
        "spark.pyspark.driver.python=python3.11",
    ]
    assert args[7] == "--py-files" and args[8].startswith("s3://") and args[8].endswith(".zip")
    assert args[9].startswith("s3://") and args[9].endswith(".py")
    job_args = dict(zip(args[10::2], args[11::2], strict=True))
    assert job_args["--source-stream"].startswith(f"<import {pipeline.streams.stack_name}:ExportsOutputRef")
    assert job_args["--sink-stream"].startswith(f"<import {pipeline.streams.stack_name}:ExportsOutputRef")
    assert job_args["--region"] == "eu-west-1"
    assert job_args["--checkpoint-location"].startswith(f"s3://{bucket}")
    assert job_args["--checkpoint-location"].endswith("/checkpoints/country_counts")
    assert job_args["--stop-marker"].endswith("/markers/country_counts.stop")
    # The source keeps its metadata in the metadata stack's table (kinesis.metadataCommitterType=DYNAMODB).
    metadata_ref = f"<import {pipeline.metadata.stack_name}:ExportsOutputRef{logical_id(pipeline.metadata.table)}"
    assert job_args["--metadata-table"].startswith(metadata_ref)


def test_instance_role_may_read_exactly_the_code_assets(cfn, pipeline):
    (policy,) = (
        r
        for r in resources_of_type(cfn["emr"], "AWS::IAM::Policy").values()
        if r["Properties"]["Roles"][0].get("Fn::ImportValue")
    )
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "s3:GetObject"
    keys = sorted(render(r).rsplit("/", 1)[1] for r in statement["Resource"])
    assets = [pipeline.emr.pyfiles, pipeline.emr.wheelhouse, pipeline.emr.bootstrap, pipeline.emr.job]
    assert keys == sorted(asset.s3_object_key for asset in assets)
    assert f"ExportsOutputRef{logical_id(pipeline.access.instance_role)}" in render(policy["Properties"]["Roles"][0])


def test_variant_uses_the_given_subnet_no_core_group_and_external_certificates(variant):
    from aws_cdk.assertions import Template

    template = Template.from_stack(variant.emr)
    template.resource_count_is("AWS::EC2::VPC", 0)
    template.resource_count_is("AWS::EC2::VPCEndpoint", 0)
    (cluster,) = template.find_resources("AWS::EMR::Cluster").values()
    assert cluster["Properties"]["Instances"]["Ec2SubnetId"] == "subnet-0123456789abcdef0"
    assert "CoreInstanceGroup" not in cluster["Properties"]["Instances"]
    (config,) = template.find_resources("AWS::EMR::SecurityConfiguration").values()
    tls = config["Properties"]["SecurityConfiguration"]["EncryptionConfiguration"]["InTransitEncryptionConfiguration"]
    assert tls["TLSCertificateConfiguration"]["S3Object"] == "s3://my-certs/emr/certs.zip"


def test_without_the_job_file_there_is_no_step_and_synth_warns(variant):
    from aws_cdk.assertions import Annotations, Template

    Template.from_stack(variant.emr).resource_count_is("AWS::EMR::Step", 0)
    Annotations.from_stack(variant.emr).has_warning("*", Match.string_like_regexp("country_counts.py does not exist"))


def test_submit_country_counts_false_leaves_out_the_step(project_root, infra_environ):
    from aws_cdk.assertions import Template

    from infra.app import build_app

    pipeline = build_app(
        context={"submitCountryCounts": "false"}, project_root=project_root, environ=infra_environ, run_nag=False
    )
    assert pipeline.emr.job is not None
    Template.from_stack(pipeline.emr).resource_count_is("AWS::EMR::Step", 0)
