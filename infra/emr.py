"""The EMR cluster (emr-spark-8.x, Spark 4), its security configuration, the code it runs as S3 assets (the
wheelhouse of the connector's wheel and its hash-locked dependencies, installed offline by a bootstrap action;
the jobs' zip), and the step that `spark-submit`s the `country_counts` job (source metadata in the metadata
stack's DynamoDB table).

Built by `infra.app.build_app` after the data and access stacks, whose resources it references.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from aws_cdk import Annotations, Aws, CfnOutput, Stack, Tags
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_emr as emr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from infra import layout, nag, packaging, wheelhouse
from infra.access import AccessStack
from infra.config import InfraConfig

JOB = "country_counts"
# The AWS-managed EMR v2 service policy acts only on resources carrying this tag.
EMR_MANAGED_TAG = ("for-use-with-amazon-emr-managed-policies", "true")
# IMDSv2 only (a session token is required, so a request forged through an SSRF cannot read the role's keys),
# and the token's PUT answer does not leave the instance (hop limit 1: not reachable from a container).
IMDS_CONFIGURATION = {"MinimumInstanceMetadataServiceVersion": 2, "HttpPutResponseHopLimit": 1}
# What the nodes call, each through an interface endpoint in the private subnet (no internet route at all):
# the job's streams; STS for a job that assumes a role (kinesis.stsRoleArn); KMS for the local-disk key; the
# job's metrics (CloudWatch monitoring); CloudWatch Logs, for the Amazon CloudWatch agent application that
# emr-spark-8.0.0 offers (add it to the cluster's applications to send logs there); and EMR's API for calls
# made from inside the VPC. S3 and DynamoDB (the metadata table) use free gateway endpoints.
INTERFACE_ENDPOINTS = {
    "Kinesis": ec2.InterfaceVpcEndpointAwsService.KINESIS_STREAMS,
    "Sts": ec2.InterfaceVpcEndpointAwsService.STS,
    "Kms": ec2.InterfaceVpcEndpointAwsService.KMS,
    "Monitoring": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_MONITORING,
    "Logs": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
    "Emr": ec2.InterfaceVpcEndpointAwsService.EMR,
}
# The new VPC's range, written out: the endpoints' security group admits HTTPS from it (a literal rather than
# the VPC's CidrBlock attribute, which cdk-nag's EC23 check cannot read).
VPC_CIDR = "10.40.0.0/16"
GATEWAY_ENDPOINTS = {
    "S3": ec2.GatewayVpcEndpointAwsService.S3,
    "DynamoDb": ec2.GatewayVpcEndpointAwsService.DYNAMODB,
}


def grant_asset_read(scope: Construct, role: iam.IRole, assets: list[s3_assets.Asset]) -> iam.Policy:
    """GetObject on exactly the asset objects (they live in the CDK bootstrap bucket, not ours), for `role`."""
    resources = [f"arn:{Aws.PARTITION}:s3:::{asset.s3_bucket_name}/{asset.s3_object_key}" for asset in assets]
    return iam.Policy(
        scope,
        "CodeAssetsRead",
        roles=[role],
        statements=[iam.PolicyStatement(sid="ReadCodeAssets", actions=["s3:GetObject"], resources=resources)],
    )


class EmrStack(Stack):
    """One long-running cluster that terminates itself when idle, plus the country_counts step."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: InfraConfig,
        access: AccessStack,
        bucket: s3.IBucket,
        disk_key: kms.IKey,
        source: kinesis.IStream,
        sink: kinesis.IStream,
        table: dynamodb.ITable,
        project_root: Path = packaging.PROJECT_ROOT,
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        Tags.of(self).add(*EMR_MANAGED_TAG)
        self.config = config
        self.bucket = bucket
        self.pyfiles, self.wheelhouse, self.bootstrap, self.job = self._code_assets(project_root)
        assets = [a for a in (self.pyfiles, self.wheelhouse, self.bootstrap, self.job) if a]
        grant_asset_read(self, access.instance_role, assets)
        self.security_configuration = self._security_configuration(disk_key)
        self.vpc: ec2.Vpc | None = None
        self.cluster = self._cluster(access, self._subnet_id())
        self._accept_findings()
        self.step = self._step(source, sink, table) if self.job is not None and config.submit_country_counts else None
        CfnOutput(self, "ClusterId", value=self.cluster.ref, description="infra.submit_step --cluster-id")
        CfnOutput(self, "PyFilesUri", value=self.pyfiles.s3_object_url)
        CfnOutput(self, "WheelhouseUri", value=self.wheelhouse.s3_object_url)
        CfnOutput(self, "LogUri", value=f"s3://{bucket.bucket_name}/{layout.LOGS_PREFIX}emr/")

    def _code_assets(
        self, root: Path
    ) -> tuple[s3_assets.Asset, s3_assets.Asset, s3_assets.Asset, s3_assets.Asset | None]:
        """The jobs' --py-files zip; the wheelhouse (the connector's wheel, built offline now, and the wheels of
        infra/emr-lock.txt, every one pinned by hash; a folder, which CDK uploads as a zip) and the bootstrap
        script that installs it; and the job's entry file."""
        build_dir = Path(tempfile.mkdtemp(prefix="infra-build-"))
        pyfiles = s3_assets.Asset(self, "PyFiles", path=str(packaging.build_pyfiles_zip(build_dir, root)))
        wheel_file = packaging.build_wheel(build_dir / "dist", root)
        cache = Path(self.config.wheel_cache) if self.config.wheel_cache else None
        house = wheelhouse.build_wheelhouse(build_dir, wheel_file, root / wheelhouse.LOCK_PATH, cache=cache)
        wheels = s3_assets.Asset(self, "Wheelhouse", path=str(house))
        bootstrap = s3_assets.Asset(self, "BootstrapScript", path=str(packaging.write_bootstrap_script(build_dir)))
        job_file = packaging.job_entry(JOB, root)
        if not job_file.is_file():
            # The sample jobs land separately: without the entry file, synth still works and says so.
            Annotations.of(self).add_warning(f"{job_file} does not exist: the {JOB} step is not created")
            return pyfiles, wheels, bootstrap, None
        return pyfiles, wheels, bootstrap, s3_assets.Asset(self, "CountryCountsJob", path=str(job_file))

    def _accept_findings(self) -> None:
        reason = (
            "cdk-nag 3.0.2 reads EnableAtRestEncryption/EnableInTransitEncryption at the top level of the "
            "security configuration, but EMR requires them under EncryptionConfiguration, where ours are "
            "(tests/infra assert both)."
        )
        nag.accept(self.cluster, "AwsSolutions-EMR4", reason)
        nag.accept(self.cluster, "AwsSolutions-EMR5", reason)
        nag.accept(
            self.cluster,
            "AwsSolutions-EMR6",
            "No interactive login at all: no key pair (so no SSH), private subnets without an internet route, and "
            "no Session Manager permissions on the instance role; work reaches the cluster only as EMR steps, "
            "which EMR authorizes with IAM. Kerberos would authenticate users of a shared cluster; this one runs "
            "one pipeline's steps only.",
        )

    def _tls_uri(self) -> str:
        return self.config.tls_certificates_s3_uri or f"s3://{self.bucket.bucket_name}/{layout.DEFAULT_TLS_KEY}"

    def _security_configuration(self, disk_key: kms.IKey) -> emr.CfnSecurityConfiguration:
        """At rest: SSE-S3 for EMRFS, KMS for local disks. In transit: TLS with the PEM zip at `_tls_uri`."""
        encryption = {
            "EnableAtRestEncryption": True,
            "EnableInTransitEncryption": True,
            "AtRestEncryptionConfiguration": {
                "S3EncryptionConfiguration": {"EncryptionMode": "SSE-S3"},
                "LocalDiskEncryptionConfiguration": {
                    "EncryptionKeyProviderType": "AwsKms",
                    "AwsKmsKey": disk_key.key_arn,
                },
            },
            "InTransitEncryptionConfiguration": {
                "TLSCertificateConfiguration": {"CertificateProviderType": "PEM", "S3Object": self._tls_uri()}
            },
        }
        return emr.CfnSecurityConfiguration(
            self,
            "SecurityConfiguration",
            security_configuration={
                "EncryptionConfiguration": encryption,
                "InstanceMetadataServiceConfiguration": IMDS_CONFIGURATION,
            },
        )

    def _subnet_id(self) -> str:
        """The configured subnet (its VPC must offer what `_vpc` builds, docs/infra.md), or the private subnet
        of a new VPC."""
        if self.config.subnet_id:
            return self.config.subnet_id
        self.vpc = self._vpc()
        return self.vpc.isolated_subnets[0].subnet_id

    def _vpc(self) -> ec2.Vpc:
        """One AZ, one private subnet without any route to the internet (no internet or NAT gateway, so no
        public IPs), the VPC endpoints in INTERFACE_ENDPOINTS and GATEWAY_ENDPOINTS, and a flow log."""
        vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(VPC_CIDR),
            max_azs=1,
            nat_gateways=0,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="emr", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=24)
            ],
            gateway_endpoints={
                name: ec2.GatewayVpcEndpointOptions(service=service) for name, service in GATEWAY_ENDPOINTS.items()
            },
        )
        endpoints_group = ec2.SecurityGroup(
            self,
            "EndpointsSecurityGroup",
            vpc=vpc,
            description="HTTPS from inside the VPC to its interface endpoints",
            allow_all_outbound=False,
        )
        endpoints_group.add_ingress_rule(ec2.Peer.ipv4(VPC_CIDR), ec2.Port.tcp(443), "HTTPS from the VPC")
        self.endpoints_security_group = endpoints_group
        for name, service in INTERFACE_ENDPOINTS.items():
            # Private DNS: the SDKs' default endpoint names resolve to the endpoint inside the VPC.
            vpc.add_interface_endpoint(
                f"{name}Endpoint",
                service=service,
                private_dns_enabled=True,
                open=False,
                security_groups=[endpoints_group],
            )
        vpc.add_flow_log("FlowLog")
        return vpc

    def _cluster(self, access: AccessStack, subnet_id: str) -> emr.CfnCluster:
        config = self.config
        core = (
            emr.CfnCluster.InstanceGroupConfigProperty(
                instance_count=config.core_instance_count, instance_type=config.core_instance_type, market="ON_DEMAND"
            )
            if config.core_instance_count
            else None
        )
        return emr.CfnCluster(
            self,
            "Cluster",
            name=f"{config.stack_prefix}-pipeline",
            release_label=config.release_label,
            applications=[emr.CfnCluster.ApplicationProperty(name="Spark")],
            service_role=access.service_role.role_name,
            job_flow_role=access.instance_profile.instance_profile_name,
            log_uri=f"s3://{self.bucket.bucket_name}/{layout.LOGS_PREFIX}emr/",
            security_configuration=self.security_configuration.ref,
            visible_to_all_users=True,
            # Cost guard: a cluster with nothing to do terminates itself.
            auto_termination_policy=emr.CfnCluster.AutoTerminationPolicyProperty(
                idle_timeout=config.idle_timeout_seconds
            ),
            bootstrap_actions=[
                emr.CfnCluster.BootstrapActionConfigProperty(
                    name="install-connector-wheelhouse",
                    script_bootstrap_action=emr.CfnCluster.ScriptBootstrapActionConfigProperty(
                        path=self.bootstrap.s3_object_url,
                        args=[config.python_executable, self.wheelhouse.s3_object_url],
                    ),
                )
            ],
            instances=emr.CfnCluster.JobFlowInstancesConfigProperty(
                master_instance_group=emr.CfnCluster.InstanceGroupConfigProperty(
                    instance_count=1, instance_type=config.primary_instance_type, market="ON_DEMAND"
                ),
                core_instance_group=core,
                ec2_subnet_id=subnet_id,
                keep_job_flow_alive_when_no_steps=True,
                termination_protected=False,
            ),
        )

    def _step(self, source: kinesis.IStream, sink: kinesis.IStream, table: dynamodb.ITable) -> emr.CfnStep:
        """command-runner.jar runs spark-submit with the jobs' zip on --py-files (see infra.packaging); the job
        keeps its source metadata in the metadata table (kinesis.metadataCommitterType=DYNAMODB)."""
        args = packaging.spark_submit_command(
            job_uri=self.job.s3_object_url,
            pyfiles_uri=self.pyfiles.s3_object_url,
            python=self.config.python_executable,
            job_args=packaging.job_arguments(
                job=JOB,
                source_stream=source.stream_name,
                sink_stream=sink.stream_name,
                region=self.region,
                bucket=self.bucket.bucket_name,
                metadata_table=table.table_name,
                extra=["--cloudwatch-namespace", self.config.cloudwatch_namespace],
            ),
        )
        return emr.CfnStep(
            self,
            "CountryCountsStep",
            job_flow_id=self.cluster.ref,
            name=JOB,
            action_on_failure="CONTINUE",
            hadoop_jar_step=emr.CfnStep.HadoopJarStepConfigProperty(jar="command-runner.jar", args=args),
        )
