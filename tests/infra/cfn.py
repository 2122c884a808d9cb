"""Helpers to read synthesized CloudFormation in tests: render intrinsic functions to short strings and
collect every IAM policy statement of a template."""

from __future__ import annotations

import aws_cdk as cdk


def logical_id(construct) -> str:
    """The logical id of an L2 construct's CloudFormation resource."""
    stack = cdk.Stack.of(construct)
    return stack.resolve(stack.get_logical_id(construct.node.default_child))


def render(value) -> str:
    """`{"Fn::Join": ["", [{"Fn::ImportValue": "X"}, "/a/*"]]}` -> `<import X>/a/*`, and so on."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return ",".join(render(v) for v in value)
    ((function, argument),) = value.items()
    if function == "Fn::Join":
        return argument[0].join(render(part) for part in argument[1])
    if function == "Fn::ImportValue":
        return f"<import {argument}>"
    if function == "Fn::GetAtt":
        return f"<{argument[0]}.{argument[1]}>"
    if function == "Ref":
        return f"<{argument}>"
    if function == "Fn::Sub":
        return argument
    raise AssertionError(f"unexpected intrinsic {function}")


def policy_statements(template: dict) -> list[tuple[str, dict]]:
    """(resource logical id, statement) for every statement of every role's and policy's documents."""
    found = []
    for lid, resource in template["Resources"].items():
        properties = resource.get("Properties", {})
        documents = []
        if resource["Type"] == "AWS::IAM::Role":
            documents = [p["PolicyDocument"] for p in properties.get("Policies", [])]
        elif resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            documents = [properties["PolicyDocument"]]
        found += [(lid, statement) for document in documents for statement in document["Statement"]]
    return found


def as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def resources_of_type(template: dict, resource_type: str) -> dict[str, dict]:
    return {lid: r for lid, r in template["Resources"].items() if r["Type"] == resource_type}
