"""AWS CDK infrastructure for the Kinesis <-> Spark pipeline on Amazon EMR (see docs/infra.md).

`infra.app.build_app` wires the stacks; each module below holds one concern. `infra.submit_step` submits a
job to a running cluster; `infra.packaging` builds what the cluster runs.
"""
