"""cdk-nag's AwsSolutions pack passes on every stack, and only because of fixes or reasoned acknowledgements."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3
from cdk_nag import AwsSolutionsChecks

from infra import nag

STACKS = ["streams", "metadata", "storage", "access", "emr", "monitoring", "serverless"]


@pytest.fixture(scope="module")
def unsynthesized(project_root, root_without_job, infra_environ):
    """Fresh apps, checked before any synth: afterwards cross-stack references read as export names, and the
    IAM5 findings get other ids than the ones acknowledged (build_app checks before synth for that reason)."""
    from infra.app import build_app
    from tests.infra.conftest import ALARM_EMAIL, CONSUMER_ACCOUNT, EXTERNAL_ID, SHARED_CONSUMERS

    main = build_app(
        context={
            "consumerAccountId": CONSUMER_ACCOUNT,
            "externalId": EXTERNAL_ID,
            "alarmEmail": ALARM_EMAIL,
            "serverless": True,
        },
        project_root=project_root,
        environ=infra_environ,
        run_nag=False,
    )
    other = build_app(
        context={
            "streamMode": "ON_DEMAND",
            "subnetId": "subnet-0123456789abcdef0",
            "coreInstanceCount": 0,
            "consumerAccountId": CONSUMER_ACCOUNT,
            "crossAccountAccess": "resourcePolicy",
            "sharedConsumers": SHARED_CONSUMERS,
        },
        project_root=root_without_job,
        environ=infra_environ,
        run_nag=False,
    )
    return main, other


@pytest.mark.parametrize("name", STACKS)
def test_aws_solutions_checks_pass(unsynthesized, name):
    report = AwsSolutionsChecks().validate_scope(getattr(unsynthesized[0], name))
    assert report.success, [v.rule_name for v in report.violations]


def test_variant_passes_too(unsynthesized):
    for stack in unsynthesized[1].stacks:
        report = AwsSolutionsChecks().validate_scope(stack)
        assert report.success, (stack.stack_name, [v.rule_name for v in report.violations])


def _acknowledged(stacks) -> dict[str, str]:
    """`rule -> reason` for every acknowledgement recorded in the construct metadata of `stacks`."""
    found = {}
    for stack in stacks:
        for construct in stack.node.find_all():
            for entry in construct.node.metadata:
                if entry.type == cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                    found.update({f"{construct.node.path} {rule}": reason for rule, reason in entry.data.items()})
    return found


def test_acknowledgements_are_the_known_few_each_with_a_reason(unsynthesized):
    pipeline = unsynthesized[0]
    # aws-cdk-lib acknowledges a few CloudFormation-Validate findings of its own; ours are the AwsSolutions ones.
    acknowledged = {k: v for k, v in _acknowledged(pipeline.stacks).items() if "AwsSolutions-" in k}
    rules = sorted({key.split("::", 1)[1].split("[")[0] for key in acknowledged})
    assert rules == [
        "AwsSolutions-EMR4",
        "AwsSolutions-EMR5",
        "AwsSolutions-EMR6",
        "AwsSolutions-IAM4",
        "AwsSolutions-IAM5",
        "AwsSolutions-KDS3",
        "AwsSolutions-S1",
    ]
    # IAM5 only for resource paths below our own ARNs (2 stream consumer paths, 2 more under the cross-account
    # role's consumer name prefix, 6 bucket prefixes), for PutMetricData, which has no resources (scoped by its
    # namespace condition instead), and for logs:DescribeLogGroups of the Serverless job role (account-wide only).
    assert sum("AwsSolutions-IAM5[" in key for key in acknowledged) == 12
    assert sum("AwsSolutions-IAM5[Resource::*]" in key for key in acknowledged) == 1
    assert all(len(reason) > 60 for reason in acknowledged.values()), acknowledged


def test_no_reason_names_a_way_in_that_the_stacks_do_not_give(unsynthesized, cfn):
    """Reasons must be true. EMR6's says nobody logs in: no key pair, no SSM permission or endpoint anywhere."""
    reasons = _acknowledged(unsynthesized[0].stacks)
    (emr6,) = [reason for key, reason in reasons.items() if "AwsSolutions-EMR6" in key]
    assert "no key pair" in emr6 and "no Session Manager permissions" in emr6
    assert not [reason for reason in reasons.values() if "use SSM" in reason or "operators use" in reason]
    templates = json.dumps(cfn)
    assert '"ssm:' not in templates and ".ssm" not in templates and "Ec2KeyName" not in templates


def test_check_fails_on_an_unacknowledged_finding():
    stack = cdk.Stack(cdk.App(), "Bare")
    s3.Bucket(stack, "Plain")  # no SSL enforcement, no access logs: AwsSolutions-S1 and -S10
    with pytest.raises(nag.NagError, match="AwsSolutions-S10"):
        nag.check(stack)


def test_accept_silences_exactly_the_named_finding():
    stack = cdk.Stack(cdk.App(), "Accepted")
    bucket = s3.Bucket(stack, "Plain", enforce_ssl=True)
    with pytest.raises(nag.NagError, match="AwsSolutions-S1"):
        nag.check(stack)
    nag.accept(bucket, "AwsSolutions-S1", "test: access logs are not wanted here")
    nag.check(stack)
