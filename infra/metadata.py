"""The DynamoDB table where the connector records, per batch and shard, where each read ended.

Keys follow the connector's metadata layout: partition key `sourceId`, sort key `batchShard`, TTL `expiresAt`.
"""

from __future__ import annotations

from aws_cdk import CfnOutput, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from infra.config import InfraConfig

PARTITION_KEY = "sourceId"
SORT_KEY = "batchShard"
TTL_ATTRIBUTE = "expiresAt"


class MetadataStack(Stack):
    """One pay-per-request table with point-in-time recovery and KMS encryption at rest."""

    def __init__(self, scope: Construct, construct_id: str, *, config: InfraConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        # dynamodb.Table, not TableV2: TableV2 synthesizes AWS::DynamoDB::GlobalTable, which we do not need.
        self.table = dynamodb.Table(
            self,
            "MetadataTable",
            partition_key=dynamodb.Attribute(name=PARTITION_KEY, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=SORT_KEY, type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            time_to_live_attribute=TTL_ATTRIBUTE,
            removal_policy=RemovalPolicy.DESTROY,
        )
        CfnOutput(self, "MetadataTableName", value=self.table.table_name)
        CfnOutput(self, "MetadataTableArn", value=self.table.table_arn)
