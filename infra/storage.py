"""The pipeline's S3 bucket (code assets copied by steps, EMR logs, checkpoints, stop markers, TLS
certificates) and the KMS key that encrypts the EMR cluster's local disks.

Built by `infra.app.build_app`; `infra.layout` names the prefixes, the only places the roles may touch.
"""

from __future__ import annotations

from aws_cdk import CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra import nag
from infra.config import InfraConfig
from infra.layout import LOGS_PREFIX

# How long an overwritten or deleted object stays recoverable: long enough to notice a deleted stop marker or a
# clobbered checkpoint file over a weekend, short enough that Spark's constant checkpoint rewrites (each a new
# noncurrent version) cost at most a week of them.
NONCURRENT_VERSION_DAYS = 7


class StorageStack(Stack):
    """An SSL-only, private, S3-encrypted, versioned bucket whose logs and old versions expire, plus the cluster
    disk key."""

    def __init__(self, scope: Construct, construct_id: str, *, config: InfraConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.bucket = s3.Bucket(
            self,
            "PipelineBucket",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            # Versioned: a deleted or overwritten checkpoint, offset or stop marker can be restored.
            versioned=True,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-logs", prefix=LOGS_PREFIX, expiration=Duration.days(config.log_retention_days)
                ),
                s3.LifecycleRule(
                    id="abort-incomplete-uploads", abort_incomplete_multipart_upload_after=Duration.days(1)
                ),
                s3.LifecycleRule(
                    id="expire-noncurrent-versions",
                    noncurrent_version_expiration=Duration.days(NONCURRENT_VERSION_DAYS),
                ),
                # Once its noncurrent versions are gone, a delete marker alone is clutter (and a LIST cost).
                s3.LifecycleRule(id="remove-expired-delete-markers", expired_object_delete_marker=True),
            ],
            # Checkpoints outlive a stack update; `cdk destroy` leaves the bucket, docs/infra.md says how to empty it.
            removal_policy=RemovalPolicy.RETAIN,
        )
        nag.accept(
            self.bucket,
            "AwsSolutions-S1",
            "Holds the pipeline's code, logs, checkpoints and stop markers; object-level audit is CloudTrail data "
            "events' job, and a separate access-log bucket would raise the same finding in turn.",
        )
        self.disk_key = kms.Key(
            self,
            "ClusterDiskKey",
            description="Encrypts the local disks of the pipeline's EMR cluster",
            enable_key_rotation=True,
            pending_window=Duration.days(7),
            removal_policy=RemovalPolicy.DESTROY,
        )
        CfnOutput(self, "BucketName", value=self.bucket.bucket_name)
        CfnOutput(self, "BucketArn", value=self.bucket.bucket_arn)
        CfnOutput(self, "ClusterDiskKeyArn", value=self.disk_key.key_arn)
