"""IAM for the pipeline: the EMR service role, the EMR instance role (+ profile) and the optional
cross-account role, each limited to this stack set's streams, key, table and bucket.

Two lists say what the connector needs on the streams' side:
- `connector_statements`: what the pipeline's own job does (read + write + enhanced fan-out on both streams, the
  stream key, the bucket's checkpoint/metadata/marker prefixes). The instance role (and the Serverless job role)
  get exactly that, plus the metadata table and a little more for EMR.
- `cross_account_statements`: what another account's reader may do, and nothing else: read both streams by
  polling and by enhanced fan-out, with consumers of its own name prefix only, and decrypt with the stream key.
  No writes to the streams, nothing of the owner's bucket (its checkpoints, metadata and stop markers stay the
  owner's job's alone), no DeregisterStreamConsumer on the owner's consumers (docs/security.md).
"""

from __future__ import annotations

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra import layout, nag
from infra.config import InfraConfig

# Polling reads (the planner's listing and probes, the GetRecords transport) and the consumer bookkeeping of
# enhanced fan-out, which authorizes against the stream ARN.
STREAM_READ_ACTIONS = [
    "kinesis:DescribeStreamSummary",
    "kinesis:ListShards",
    "kinesis:GetShardIterator",
    "kinesis:GetRecords",
    "kinesis:RegisterStreamConsumer",
    "kinesis:ListStreamConsumers",
]
# The sink's writes: the pipeline's own job only.
STREAM_WRITE_ACTIONS = ["kinesis:PutRecord", "kinesis:PutRecords"]
STREAM_ACTIONS = [*STREAM_READ_ACTIONS, *STREAM_WRITE_ACTIONS]
# Enhanced fan-out actions authorize against the consumer ARN (<stream arn>/consumer/<name>:<timestamp>).
CONSUMER_READ_ACTIONS = ["kinesis:DescribeStreamConsumer", "kinesis:SubscribeToShard"]
CONSUMER_ACTIONS = [*CONSUMER_READ_ACTIONS, "kinesis:DeregisterStreamConsumer"]
# Writers need GenerateDataKey on a KMS-encrypted stream; readers only Decrypt.
STREAM_KEY_ACTIONS = ["kms:Decrypt", "kms:GenerateDataKey"]
STREAM_KEY_READ_ACTIONS = ["kms:Decrypt"]
# Exactly what pyspark_aws_kinesis.metadata.dynamodb calls on an existing table (tests/infra/test_metadata_access.py
# records a source run against moto and compares). The stack creates the table, so the job needs neither
# CreateTable nor UpdateTimeToLive, nor DescribeTable (the store only looks at the table when a call says it is
# missing); it deletes with BatchWriteItem only.
TABLE_ACTIONS = [
    "dynamodb:BatchGetItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:Query",
]
STATE_OBJECT_ACTIONS = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]
STATE_PREFIXES = (layout.CHECKPOINTS_PREFIX, layout.METADATA_PREFIX, layout.MARKERS_PREFIX)
# Uploaded by the operator: TLS certificates, and code that infra.submit_step ships for ad-hoc steps.
OPERATOR_PREFIXES = (layout.TLS_PREFIX, layout.CODE_PREFIX)
DISK_KEY_ACTIONS = ["kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey", "kms:DescribeKey"]
EMR_SERVICE_POLICY = "service-role/AmazonEMRServicePolicy_v2"


def cross_account_consumer_prefix(consumer_account_id: str) -> str:
    """The consumer name prefix the cross-account role may use (the connector's `kinesis.consumerNamePrefix`)."""
    return f"{consumer_account_id}-"


def cross_account_statements(
    streams: list[kinesis.IStream], stream_key: kms.IKey, consumer_prefix: str
) -> list[iam.PolicyStatement]:
    """What another account's reader may do (see the module docstring).

    Consumer-ARN actions are limited to consumers named `consumer_prefix...`: the role can neither subscribe to
    the owner's own consumers (a subscription takes a shard over from the owner's reader) nor deregister them.
    It may deregister its own, because the connector does so when a query ends with
    `kinesis.requireConsumerDeregistration` and a leftover consumer is billed to the stream owner.
    """
    stream_arns = [stream.stream_arn for stream in streams]
    return [
        iam.PolicyStatement(sid="ReadStreams", actions=STREAM_READ_ACTIONS, resources=stream_arns),
        iam.PolicyStatement(
            sid="OwnConsumers",
            actions=CONSUMER_ACTIONS,
            resources=[f"{arn}/consumer/{consumer_prefix}*" for arn in stream_arns],
        ),
        iam.PolicyStatement(sid="DecryptStreams", actions=STREAM_KEY_READ_ACTIONS, resources=[stream_key.key_arn]),
    ]


def connector_statements(
    streams: list[kinesis.IStream], stream_key: kms.IKey, bucket: s3.IBucket
) -> list[iam.PolicyStatement]:
    """What the connector and the jobs call, on exactly these resources (see the module docstring)."""
    stream_arns = [stream.stream_arn for stream in streams]
    return [
        iam.PolicyStatement(sid="Streams", actions=STREAM_ACTIONS, resources=stream_arns),
        iam.PolicyStatement(
            sid="StreamConsumers", actions=CONSUMER_ACTIONS, resources=[f"{arn}/consumer/*" for arn in stream_arns]
        ),
        iam.PolicyStatement(sid="StreamKey", actions=STREAM_KEY_ACTIONS, resources=[stream_key.key_arn]),
        iam.PolicyStatement(sid="ListBucket", actions=["s3:ListBucket"], resources=[bucket.bucket_arn]),
        iam.PolicyStatement(
            sid="StateObjects",
            actions=STATE_OBJECT_ACTIONS,
            resources=[bucket.arn_for_objects(f"{prefix}*") for prefix in STATE_PREFIXES],
        ),
    ]


class AccessStack(Stack):
    """Roles and their policies; every ARN a user needs is a stack output."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: InfraConfig,
        streams: list[kinesis.IStream],
        stream_key: kms.IKey,
        table: dynamodb.ITable,
        bucket: s3.IBucket,
        disk_key: kms.IKey,
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)

        # Fresh statement objects per role: a statement belongs to one policy document.
        def connector() -> list[iam.PolicyStatement]:
            return connector_statements(streams, stream_key, bucket)

        # The metadata table lives with the job: the connector reaches it with the job's own credentials, never
        # through the cross-account role, so only the instance role may use it.
        def table_statement() -> iam.PolicyStatement:
            return iam.PolicyStatement(sid="MetadataTable", actions=TABLE_ACTIONS, resources=[table.table_arn])

        self.instance_role = self._instance_role([*connector(), table_statement()], bucket, disk_key)
        # EMR Serverless's job role: the same statements as the instance role, less the cluster's disk key.
        self.serverless_job_role = (
            self._serverless_job_role([*connector(), table_statement(), *self._job_extras(bucket)])
            if config.serverless
            else None
        )
        self.instance_profile = iam.InstanceProfile(self, "InstanceProfile", role=self.instance_role)
        self.service_role = self._service_role()
        self.cross_account_role = (
            self._cross_account_role(config, streams, stream_key) if config.cross_account_role else None
        )
        self._accept_findings(config, streams, bucket)
        CfnOutput(self, "EmrServiceRoleArn", value=self.service_role.role_arn)
        CfnOutput(self, "EmrInstanceRoleArn", value=self.instance_role.role_arn)
        CfnOutput(self, "EmrInstanceProfileArn", value=self.instance_profile.instance_profile_arn)
        if self.cross_account_role is not None:
            CfnOutput(self, "CrossAccountRoleArn", value=self.cross_account_role.role_arn)
        if self.serverless_job_role is not None:
            CfnOutput(self, "ServerlessJobRoleArn", value=self.serverless_job_role.role_arn)

    def _accept_findings(self, config: InfraConfig, streams: list[kinesis.IStream], bucket: s3.IBucket) -> None:
        """The only wildcards are in resource paths below our own ARNs, never in actions."""
        suffixes = ["/consumer/*"]
        if config.cross_account_role:
            suffixes.append(f"/consumer/{cross_account_consumer_prefix(config.consumer_account_id)}*")
        for stream in streams:
            for suffix in suffixes:
                nag.accept(
                    self,
                    nag.wildcard_finding(stream, suffix),
                    "EFO consumer ARNs end in a creation timestamp unknown before RegisterStreamConsumer; the "
                    "wildcard stays under this stream's ARN (and the cross-account role's under its name prefix).",
                )
        for prefix in (*STATE_PREFIXES, layout.LOGS_PREFIX, *OPERATOR_PREFIXES):
            nag.accept(
                self,
                nag.wildcard_finding(bucket, f"/{prefix}*"),
                f"Objects under the {prefix} prefix of our bucket are created at run time (checkpoints, markers, "
                "metadata, logs) or uploaded by the operator (TLS certificates, code); scoped to that prefix.",
            )
        nag.accept(
            self.service_role,
            f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{EMR_SERVICE_POLICY}]",
            "AmazonEMRServicePolicy_v2 is the AWS-maintained EMR service policy; it acts only on resources tagged "
            "for-use-with-amazon-emr-managed-policies=true, and an inline copy would drift from EMR's needs.",
        )

    @staticmethod
    def _job_extras(bucket: s3.IBucket) -> list[iam.PolicyStatement]:
        """What a job's runtime needs beside the connector: write its logs, read the operator's uploads."""
        return [
            iam.PolicyStatement(
                sid="EmrLogs", actions=["s3:PutObject"], resources=[bucket.arn_for_objects(f"{layout.LOGS_PREFIX}*")]
            ),
            iam.PolicyStatement(
                sid="ReadUploads",
                actions=["s3:GetObject"],
                resources=[bucket.arn_for_objects(f"{prefix}*") for prefix in OPERATOR_PREFIXES],
            ),
        ]

    def _instance_role(self, connector: list[iam.PolicyStatement], bucket: s3.IBucket, disk_key: kms.IKey) -> iam.Role:
        """The role of the cluster's EC2 instances: the connector's needs, EMR logs, uploads, disk key."""
        emr_extra = [
            *self._job_extras(bucket),
            iam.PolicyStatement(sid="ClusterDiskKey", actions=DISK_KEY_ACTIONS, resources=[disk_key.key_arn]),
        ]
        return iam.Role(
            self,
            "EmrInstanceRole",
            description="EC2 instances of the pipeline's EMR cluster",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            inline_policies={"pipeline": iam.PolicyDocument(statements=[*connector, *emr_extra])},
        )

    def _serverless_job_role(self, statements: list[iam.PolicyStatement]) -> iam.Role:
        """The runtime role of the pipeline's EMR Serverless job runs (infra.serverless). Only EMR Serverless may
        assume it, only for an application of this account and region (confused-deputy guard: the application
        is created after this stack, so its ARN is matched by pattern)."""
        stack = Stack.of(self)
        return iam.Role(
            self,
            "ServerlessJobRole",
            description="Runtime role of the pipeline's EMR Serverless job runs",
            assumed_by=iam.ServicePrincipal(
                "emr-serverless.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {
                        "aws:SourceArn": f"arn:{stack.partition}:emr-serverless:{stack.region}:{stack.account}"
                        ":/applications/*"
                    },
                },
            ),
            inline_policies={"pipeline": iam.PolicyDocument(statements=statements)},
        )

    def _service_role(self) -> iam.Role:
        """EMR's own role. The AWS-managed v2 policy is tag-scoped; PassRole is limited to our instance role."""
        role = iam.Role(
            self,
            "EmrServiceRole",
            description="Amazon EMR service role for the pipeline's cluster",
            assumed_by=iam.ServicePrincipal(
                "elasticmapreduce.amazonaws.com",
                # Confused-deputy guard: EMR may assume it only on behalf of this account.
                conditions={"StringEquals": {"aws:SourceAccount": Stack.of(self).account}},
            ),
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(EMR_SERVICE_POLICY)],
            inline_policies={
                "pass-instance-role": iam.PolicyDocument(
                    statements=[
                        iam.PolicyStatement(
                            sid="PassInstanceRole",
                            actions=["iam:PassRole"],
                            resources=[self.instance_role.role_arn],
                            conditions={"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
                        )
                    ]
                )
            },
        )
        return role

    def _cross_account_role(
        self, config: InfraConfig, streams: list[kinesis.IStream], stream_key: kms.IKey
    ) -> iam.Role:
        """A role the consumer account may assume only with the agreed external ID (confused-deputy guard), to
        read the streams and nothing else (`cross_account_statements`)."""
        prefix = cross_account_consumer_prefix(config.consumer_account_id)
        return iam.Role(
            self,
            "CrossAccountRole",
            description=f"Lets account {config.consumer_account_id} read these streams with the connector",
            assumed_by=iam.AccountPrincipal(config.consumer_account_id),
            external_ids=[config.external_id],
            max_session_duration=Duration.hours(1),
            inline_policies={
                "read-streams": iam.PolicyDocument(statements=cross_account_statements(streams, stream_key, prefix))
            },
        )
