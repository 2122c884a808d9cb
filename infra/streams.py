"""The source and sink Kinesis streams, encrypted with one customer-managed KMS key.

Built by `infra.app.build_app`; `infra.access` scopes its policies to `source`, `sink` and `key`.
"""

from __future__ import annotations

from aws_cdk import CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra import nag
from infra.access import STREAM_KEY_READ_ACTIONS
from infra.config import InfraConfig

# What a stream's resource policy shares with the reader account: polling reads. Enhanced fan-out goes through
# consumers the owner registers, each shared by a policy of its own (docs/infra.md, "Cross-account").
SHARED_READ_ACTIONS = [
    "kinesis:DescribeStreamSummary",
    "kinesis:ListShards",
    "kinesis:GetShardIterator",
    "kinesis:GetRecords",
]
SHARED_CONSUMER_ACTIONS = ["kinesis:DescribeStreamConsumer", "kinesis:SubscribeToShard"]


class StreamsStack(Stack):
    """Two streams (provisioned with shard counts, or on-demand) and their KMS key."""

    def __init__(self, scope: Construct, construct_id: str, *, config: InfraConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.key = kms.Key(
            self,
            "StreamKey",
            description="Encrypts the pipeline's source and sink Kinesis streams",
            enable_key_rotation=True,
            # Streams are disposable test data: `cdk destroy` schedules the key for deletion after 7 days.
            pending_window=Duration.days(7),
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.source = self._stream("Source", config.source_stream_name, config.source_shards, config)
        self.sink = self._stream("Sink", config.sink_stream_name, config.sink_shards, config)
        if config.cross_account and not config.cross_account_role:
            self._share_by_policy(config.consumer_account_id)
            for name in config.shared_consumers:
                self._share_consumer(config.consumer_account_id, name)
        nag.accept(
            self,
            "AwsSolutions-KDS3",
            "A customer-managed key instead of aws/kinesis: its use is granted only to this pipeline's roles, and "
            "the cross-account role can be given access to it (aws/kinesis cannot be shared); ~1 USD/month.",
        )
        CfnOutput(self, "SourceStreamName", value=self.source.stream_name, description="generator --stream")
        CfnOutput(self, "SourceStreamArn", value=self.source.stream_arn)
        CfnOutput(self, "SinkStreamName", value=self.sink.stream_name)
        CfnOutput(self, "SinkStreamArn", value=self.sink.stream_arn)
        CfnOutput(self, "StreamKeyArn", value=self.key.key_arn)

    def _share_by_policy(self, reader_account: str | None) -> None:
        """``crossAccountAccess=resourcePolicy``: the reader account may read both streams by ARN with its own
        credentials (docs/security.md): the read actions only, on each stream's resource policy, and Decrypt on
        the key through the key's policy."""
        reader = iam.AccountPrincipal(reader_account)
        for construct_id, stream in (("Source", self.source), ("Sink", self.sink)):
            read = iam.PolicyStatement(
                sid="ReadByArn", principals=[reader], actions=SHARED_READ_ACTIONS, resources=[stream.stream_arn]
            )
            kinesis.CfnResourcePolicy(
                self,
                f"{construct_id}ReadPolicy",
                resource_arn=stream.stream_arn,
                resource_policy=iam.PolicyDocument(statements=[read]).to_json(),
            )
        self.key.grant(reader, *STREAM_KEY_READ_ACTIONS)

    def _share_consumer(self, reader_account: str | None, name: str) -> None:
        """``sharedConsumers``: an enhanced fan-out consumer of the source stream, registered here (the reader may
        not register one on another account's stream) as ``<reader account>-<name>``, the prefix the reader's
        own role would confine it to, and shared with the reader by the consumer's policy: describe and subscribe
        only."""
        consumer = kinesis.CfnStreamConsumer(
            self, f"SharedConsumer-{name}", consumer_name=f"{reader_account}-{name}", stream_arn=self.source.stream_arn
        )
        subscribe = iam.PolicyStatement(
            sid="SubscribeByArn",
            principals=[iam.AccountPrincipal(reader_account)],
            actions=SHARED_CONSUMER_ACTIONS,
            resources=[consumer.attr_consumer_arn],
        )
        kinesis.CfnResourcePolicy(
            self,
            f"SharedConsumer-{name}-Policy",
            resource_arn=consumer.attr_consumer_arn,
            resource_policy=iam.PolicyDocument(statements=[subscribe]).to_json(),
        )
        CfnOutput(self, f"SharedConsumer-{name}-Arn", value=consumer.attr_consumer_arn)

    def _stream(self, construct_id: str, name: str, shards: int, config: InfraConfig) -> kinesis.Stream:
        stream = self._l2_stream(construct_id, name, shards, config)
        # The L2 construct lacks both properties (aws-cdk issue 38719): set on the CloudFormation resource.
        cfn = stream.node.default_child
        assert isinstance(cfn, kinesis.CfnStream)
        if config.max_record_size_kib is not None:
            cfn.add_property_override("MaxRecordSizeInKiB", config.max_record_size_kib)
        if config.warm_throughput_mibps is not None:
            cfn.add_property_override("WarmThroughputMiBps", config.warm_throughput_mibps)
        return stream

    def _l2_stream(self, construct_id: str, name: str, shards: int, config: InfraConfig) -> kinesis.Stream:
        return kinesis.Stream(
            self,
            construct_id,
            stream_name=name,
            stream_mode=kinesis.StreamMode.ON_DEMAND if config.on_demand else kinesis.StreamMode.PROVISIONED,
            # On-demand streams scale themselves; CloudFormation rejects a shard count with them.
            shard_count=None if config.on_demand else shards,
            retention_period=Duration.hours(config.stream_retention_hours),
            encryption=kinesis.StreamEncryption.KMS,
            encryption_key=self.key,
            removal_policy=RemovalPolicy.DESTROY,
        )
