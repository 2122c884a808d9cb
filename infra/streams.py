"""The source and sink Kinesis streams, encrypted with one customer-managed KMS key.

Built by `infra.app.build_app`; `infra.access` scopes its policies to `source`, `sink` and `key`.
"""

from __future__ import annotations

from aws_cdk import CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra import nag
from infra.config import InfraConfig


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

    def _stream(self, construct_id: str, name: str, shards: int, config: InfraConfig) -> kinesis.Stream:
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
