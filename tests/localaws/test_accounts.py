"""``localaws.accounts``: how a stored resource policy is evaluated for another account's call (the proxy itself,
in front of kinesis-mock, is exercised by tests/connector/test_stream_ids.py)."""

from __future__ import annotations

import json

import pytest

from localaws.accounts import policy_effect

STREAM = "arn:aws:kinesis:us-east-1:000000000000:stream/orders"
CONSUMER = f"{STREAM}/consumer/reader:1700000000"


def _doc(*statements: dict) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def _allow(principal, actions, resources, effect: str = "Allow") -> dict:
    return {"Effect": effect, "Principal": principal, "Action": actions, "Resource": resources}


@pytest.mark.parametrize(
    ("statement", "account", "action", "resource", "expected"),
    [
        (_allow({"AWS": "arn:aws:iam::111111111111:root"}, "kinesis:GetRecords", STREAM), "111111111111",
         "GetRecords", STREAM, "Allow"),
        (_allow({"AWS": ["111111111111"]}, ["kinesis:Get*"], [STREAM]), "111111111111", "GetShardIterator", STREAM,
         "Allow"),
        (_allow({"AWS": "111111111111"}, "kinesis:Get*", STREAM), "111111111111", "PutRecords", STREAM, None),
        (_allow({"AWS": "111111111111"}, "kinesis:*", STREAM), "222222222222", "GetRecords", STREAM, None),
        (_allow("*", "kinesis:*", f"{STREAM}/consumer/*"), "222222222222", "SubscribeToShard", CONSUMER, "Allow"),
        (_allow({"AWS": "111111111111"}, "kinesis:*", STREAM), "111111111111", "SubscribeToShard", CONSUMER, None),
    ],
)  # fmt: skip
def test_a_statement_matches_its_principal_action_and_resource(statement, account, action, resource, expected):
    assert policy_effect(_doc(statement), account, action, resource) == expected


def test_a_deny_wins_over_an_allow() -> None:
    document = _doc(
        _allow({"AWS": "111111111111"}, "kinesis:*", STREAM),
        _allow({"AWS": "111111111111"}, "kinesis:PutRecords", STREAM, effect="Deny"),
    )
    assert policy_effect(document, "111111111111", "GetRecords", STREAM) == "Allow"
    assert policy_effect(document, "111111111111", "PutRecords", STREAM) == "Deny"
