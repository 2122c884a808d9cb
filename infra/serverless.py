"""EMR Serverless beside the cluster (context `serverless=true`): an application on the cluster's release
(emr-spark-8.0.0, Graviton), its logs, and the code it runs as S3 assets. `python -m infra.submit_step
--serverless` starts the streaming job run on it, waits and stops it; the job role is `AccessStack`'s.

Python dependencies ship as a packed virtual environment (`spark.archives`, built at synth by
`infra.wheelhouse.build_venv_archive` from the same hash-locked wheelhouse the cluster installs) rather than a
custom image: an image needs docker and an ECR repository to build and keep, while the archive is one file built
offline here, tested like the cluster's wheelhouse, and replaced by the next synth when the code changes.

No VPC: the job's workers reach Kinesis, S3, DynamoDB and CloudWatch through EMR Serverless's own network
(which has internet access); with `networkConfiguration` they would need the same endpoints as the cluster.
Built by `infra.app.build_app` after the access and storage stacks.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from aws_cdk import CfnOutput, RemovalPolicy, Stack, Tags, Token
from aws_cdk import aws_emrserverless as emrs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from infra import layout, nag, packaging, wheelhouse
from infra.config import InfraConfig
from infra.emr import JOB, grant_asset_read

# A streaming job run keeps its workers; the application stops itself 15 minutes after its last job run.
IDLE_STOP_MINUTES = 15
LOG_PREFIX = f"{layout.LOGS_PREFIX}serverless/"
# The retention periods CloudWatch Logs accepts (PutRetentionPolicy).
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922,
                      3288, 3653)  # fmt: skip
# What a job run may grow to, per vCPU (EMR Serverless's smallest worker has 1 vCPU and 2-8 GB).
MEMORY_GB_PER_VCPU = 4


class ServerlessStack(Stack):
    """One EMR Serverless Spark application with CloudWatch and S3 logging, and the job's code as assets."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: InfraConfig,
        job_role: iam.IRole,
        bucket: s3.IBucket,
        project_root: Path = packaging.PROJECT_ROOT,
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        self.venv, self.pyfiles, self.job = self._code_assets(project_root)
        self.log_group = logs.LogGroup(
            self,
            "JobLogs",
            log_group_name=f"/aws/emr-serverless/{config.stack_prefix}-pipeline",
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.log_group.node.default_child.retention_in_days = retention_days(config.log_retention_days)
        self.application = self._application(bucket)
        self.log_policy = self._grant_logs(job_role, bucket)
        grant_asset_read(self, job_role, [a for a in (self.venv, self.pyfiles, self.job) if a])
        Tags.of(self).add("project", config.tags["project"])
        CfnOutput(self, "ApplicationId", value=self.application.attr_application_id, description="--application-id")
        CfnOutput(self, "VenvArchiveUri", value=self.venv.s3_object_url, description="--venv-uri")
        CfnOutput(self, "LogGroupName", value=self.log_group.log_group_name)
        CfnOutput(self, "LogUri", value=f"s3://{bucket.bucket_name}/{LOG_PREFIX}")

    def _code_assets(self, root: Path) -> tuple[s3_assets.Asset, s3_assets.Asset, s3_assets.Asset | None]:
        """The packed environment (connector wheel + locked dependencies, for aarch64), the jobs' zip and the
        job's entry file (the stack's default job; infra.submit_step uploads whichever job it submits)."""
        build_dir = Path(tempfile.mkdtemp(prefix="infra-serverless-"))
        wheel = packaging.build_wheel(build_dir / "dist", root)
        cache = Path(self.config.wheel_cache) if self.config.wheel_cache else None
        house = wheelhouse.build_wheelhouse(build_dir, wheel, root / wheelhouse.LOCK_PATH, cache=cache)
        archive = wheelhouse.build_venv_archive(build_dir / "venv", house, cache=cache)
        venv = s3_assets.Asset(self, "PythonEnvironment", path=str(archive))
        pyfiles = s3_assets.Asset(self, "PyFiles", path=str(packaging.build_pyfiles_zip(build_dir, root)))
        entry = packaging.job_entry(JOB, root)
        job = s3_assets.Asset(self, "CountryCountsJob", path=str(entry)) if entry.is_file() else None
        return venv, pyfiles, job

    def _application(self, bucket: s3.IBucket) -> emrs.CfnApplication:
        config = self.config
        return emrs.CfnApplication(
            self,
            "Application",
            name=f"{config.stack_prefix}-pipeline",
            release_label=config.release_label,
            type="Spark",
            architecture="ARM64",
            # Starts with the first job run, stops when idle: no cost between runs beyond storage.
            auto_start_configuration=emrs.CfnApplication.AutoStartConfigurationProperty(enabled=True),
            auto_stop_configuration=emrs.CfnApplication.AutoStopConfigurationProperty(
                enabled=True, idle_timeout_minutes=IDLE_STOP_MINUTES
            ),
            # Cost guard: the application's workers together never exceed this.
            maximum_capacity=emrs.CfnApplication.MaximumAllowedResourcesProperty(
                cpu=f"{config.serverless_max_vcpu} vCPU",
                memory=f"{config.serverless_max_vcpu * MEMORY_GB_PER_VCPU} GB",
            ),
            monitoring_configuration=emrs.CfnApplication.MonitoringConfigurationProperty(
                cloud_watch_logging_configuration=emrs.CfnApplication.CloudWatchLoggingConfigurationProperty(
                    enabled=True, log_group_name=self.log_group.log_group_name
                ),
                s3_monitoring_configuration=emrs.CfnApplication.S3MonitoringConfigurationProperty(
                    log_uri=f"s3://{bucket.bucket_name}/{LOG_PREFIX}"
                ),
            ),
        )

    def _grant_logs(self, role: iam.IRole, bucket: s3.IBucket) -> iam.Policy:
        """The job role writes its driver's and executors' logs to the log group (EMR Serverless's CloudWatch
        logging runs as the job role); its S3 logs under logs/ are already the role's (AccessStack)."""
        policy = iam.Policy(
            self,
            "WriteJobLogs",
            roles=[role],
            statements=[
                iam.PolicyStatement(
                    sid="DescribeLogGroups", actions=["logs:DescribeLogGroups"], resources=[self._log_groups_arn()]
                ),
                # The group's ARN ends in ":*", which covers its log streams.
                iam.PolicyStatement(
                    sid="JobLogStreams",
                    actions=["logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"],
                    resources=[self.log_group.log_group_arn],
                ),
            ],
        )
        region = "<AWS::Region>" if Token.is_unresolved(self.region) else self.region
        account = "<AWS::AccountId>" if Token.is_unresolved(self.account) else self.account
        nag.accept(
            policy,
            f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:{region}:{account}:log-group:*]",
            "logs:DescribeLogGroups acts on the account's list of log groups, not on any group's content, and has "
            "no narrower resource; the writes are limited to the job's own log group.",
        )
        return policy

    def _log_groups_arn(self) -> str:
        return f"arn:{self.partition}:logs:{self.region}:{self.account}:log-group:*"


def retention_days(days: int) -> int:
    """The shortest retention CloudWatch Logs allows that keeps logs at least `days` (logRetentionDays, as the
    bucket's logs/ prefix)."""
    return next((value for value in LOG_RETENTION_DAYS if value >= days), LOG_RETENTION_DAYS[-1])
