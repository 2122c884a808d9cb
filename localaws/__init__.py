"""Real AWS-compatible servers on loopback, for tests, the demo and benchmarks.

``LocalAws`` starts kinesis-mock, kinesalite and moto on free 127.0.0.1 ports, waits until each answers,
and stops them by process group. Nothing here is a mock of boto3: every call crosses a socket.
``localaws.fault_proxy`` injects faults in front of any of them; ``localaws.quota_proxy`` enforces Kinesis's
quotas in front of kinesalite or kinesis-mock (``LocalAws(quotas=True)``; docs/localaws.md).
"""

from localaws.local_aws import LocalAws
from localaws.servers import (
    KINESALITE,
    KINESIS_MOCK,
    MOTO,
    LocalServer,
    ServerSpec,
    aws_client,
    project_root,
)

__all__ = [
    "KINESALITE",
    "KINESIS_MOCK",
    "MOTO",
    "LocalAws",
    "LocalServer",
    "ServerSpec",
    "aws_client",
    "project_root",
]
