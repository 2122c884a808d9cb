"""cdk-nag AwsSolutions checks for every stack, and the findings we accept, each with its reason.

The stacks call `accept` next to the resource a finding is about, with the reason; `build_app` then calls
`check` on each stack. cdk-nag 3.x runs as a validation (`validate_scope`), not as an Aspect; acknowledged
findings are skipped by it. A finding id may name one exact finding (`AwsSolutions-IAM5[Resource::...]`).
"""

from __future__ import annotations

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks
from constructs import Construct


class NagError(RuntimeError):
    """cdk-nag found rule violations that are neither fixed nor acknowledged."""


def check(stack: cdk.Stack) -> None:
    """Raise NagError listing every unacknowledged finding. Call before synth: after it, cross-stack ARNs
    read as export names and the exact IAM5 finding ids acknowledged by `wildcard_finding` no longer match."""
    report = AwsSolutionsChecks().validate_scope(stack)
    if not report.success:
        lines = sorted({f"{v.rule_name}: {v.description}" for v in report.violations})
        raise NagError(f"cdk-nag AwsSolutions found in {stack.stack_name}:\n  " + "\n  ".join(lines))


def accept(scope: Construct, finding: str, reason: str) -> None:
    """Acknowledge one cdk-nag finding on `scope` (and below) with the reason it is acceptable here."""
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=finding, reason=reason))


def wildcard_finding(resource: Construct, suffix: str) -> str:
    """The id of the IAM5 finding for `<resource ARN><suffix>` (e.g. `/checkpoints/*`), as cdk-nag names it."""
    stack = cdk.Stack.of(resource)
    logical_id = stack.resolve(stack.get_logical_id(resource.node.default_child))
    return f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>{suffix}]"
