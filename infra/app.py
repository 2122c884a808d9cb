"""Wires the stacks of the pipeline into a CDK app: the entry point `app.py` and the tests call `build_app`.

Stack order follows the references: streams, metadata, storage -> access (roles scoped to them) -> monitoring
(dashboard, alarms, the job's PutMetricData permission) -> EMR, and with `serverless=true` EMR Serverless.
cdk-nag's AwsSolutions checks run on every stack at synth; findings we accept are acknowledged, with the
reason, next to the resource they are about (`infra.nag.accept`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk

from infra import nag, packaging
from infra.access import AccessStack
from infra.config import InfraConfig
from infra.emr import JOB as EMR_JOB
from infra.emr import EmrStack
from infra.metadata import MetadataStack
from infra.monitoring import MonitoringStack
from infra.serverless import ServerlessStack
from infra.storage import StorageStack
from infra.streams import StreamsStack


@dataclass(frozen=True)
class Pipeline:
    """The stacks of one deployment, for tests and for `app.py`."""

    app: cdk.App
    config: InfraConfig
    streams: StreamsStack
    metadata: MetadataStack
    storage: StorageStack
    access: AccessStack
    emr: EmrStack
    monitoring: MonitoringStack
    serverless: ServerlessStack | None = None

    @property
    def stacks(self) -> list[cdk.Stack]:
        stacks = [self.streams, self.metadata, self.storage, self.access, self.emr, self.monitoring]
        return stacks + ([self.serverless] if self.serverless else [])


def build_app(
    app: cdk.App | None = None,
    *,
    context: dict[str, Any] | None = None,
    project_root: Path = packaging.PROJECT_ROOT,
    run_nag: bool = True,
    environ: dict[str, str] | None = None,
) -> Pipeline:
    """Create (or fill `app`) with the pipeline's stacks; `context` overrides cdk.json/-c values (tests)."""
    app = app or cdk.App(context=context or {})
    keys = {*app.node.get_all_context(), *(context or {})}  # cdk.json, -c, and the CDK's own (left alone)
    config = InfraConfig.from_context(_getter(app, context), environ, keys)
    env = cdk.Environment(account=config.account, region=config.region)
    prefix = config.stack_prefix

    def stack_kwargs(name: str, description: str) -> dict[str, Any]:
        return {"stack_name": f"{prefix}-{name}", "env": env, "description": description}

    streams = StreamsStack(app, f"{prefix}Streams", config=config, **stack_kwargs("Streams", "Kinesis streams"))
    metadata = MetadataStack(app, f"{prefix}Metadata", config=config, **stack_kwargs("Metadata", "Metadata table"))
    storage = StorageStack(app, f"{prefix}Storage", config=config, **stack_kwargs("Storage", "Bucket and keys"))
    access = AccessStack(
        app,
        f"{prefix}Access",
        config=config,
        streams=[streams.source, streams.sink],
        stream_key=streams.key,
        table=metadata.table,
        bucket=storage.bucket,
        disk_key=storage.disk_key,
        **stack_kwargs("Access", "IAM roles"),
    )
    monitoring = MonitoringStack(
        app,
        f"{prefix}Monitoring",
        config=config,
        source=streams.source,
        sink=streams.sink,
        job_roles=[role for role in (access.instance_role, access.serverless_job_role) if role],
        job=EMR_JOB,
        **stack_kwargs("Monitoring", "Dashboard, alarms and the job's metrics permission"),
    )
    emr_stack = EmrStack(
        app,
        f"{prefix}Emr",
        config=config,
        access=access,
        bucket=storage.bucket,
        disk_key=storage.disk_key,
        source=streams.source,
        sink=streams.sink,
        table=metadata.table,
        project_root=project_root,
        **stack_kwargs("Emr", "EMR cluster and steps"),
    )
    emr_stack.add_stack_dependency(monitoring, "the job publishes metrics as soon as its step runs")
    serverless = None
    if access.serverless_job_role is not None:
        serverless = ServerlessStack(
            app,
            f"{prefix}Serverless",
            config=config,
            job_role=access.serverless_job_role,
            bucket=storage.bucket,
            project_root=project_root,
            **stack_kwargs("Serverless", "EMR Serverless application for the streaming job"),
        )
    pipeline = Pipeline(app, config, streams, metadata, storage, access, emr_stack, monitoring, serverless)
    for stack in pipeline.stacks:
        cdk.Tags.of(stack).add("project", config.tags["project"])
        if run_nag:
            nag.check(stack)
    return pipeline


def _getter(app: cdk.App, overrides: dict[str, Any] | None) -> Callable[[str], Any]:
    """Context lookup: explicit overrides first, then the app's context (cdk.json and -c)."""

    def get(key: str) -> Any:
        if overrides and key in overrides:
            return overrides[key]
        return app.node.try_get_context(key)

    return get
