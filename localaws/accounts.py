"""A loopback proxy in front of kinesis-mock that gives callers accounts and enforces streams' resource policies.

kinesis-mock keeps one account (000000000000): any access key sees every stream, and a policy stored with
PutResourcePolicy is never evaluated. AWS does more, and a reader of a stream another account shares must get it
right. ``with AccountProxy(server.endpoint_url, {"AKIAREADER": "111111111111"}) as proxy: use proxy.endpoint_url``:

- A request's account is its signing access key's (``accounts``); any other key is the owner's, 000000000000,
  whose requests pass untouched.
- Another account reaches a stream only by ARN: a ``StreamName`` resolves in the caller's own account, where the
  stream is not (``ResourceNotFoundException``), and GetRecords must name the ``StreamARN`` too.
- The call must be allowed by the resource policy of what it names (the stream, or for SubscribeToShard and the
  other consumer calls the consumer, by ARN or by stream and name, which its owner shares once it is registered):
  an ``Allow`` statement whose principal is the caller's account (``arn:aws:iam::<account>:root`` or the bare id),
  whose actions match (``kinesis:GetRecords``, ``kinesis:Get*``, ``kinesis:*``) and whose resources match the
  stream or consumer ARN (``*`` wildcards), and no such ``Deny``. Otherwise ``AccessDeniedException``, as AWS
  answers. A ListShards page that names only its ``NextToken`` passes: the token came from an allowed call.

docs/localaws.md, "Accounts and resource policies".
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler
from typing import Any

from botocore.exceptions import ClientError

from localaws.fault_proxy import KINESIS_TARGET, FaultHandler, FaultProxy, signed_request
from localaws.quota_model import ACCOUNT_ID
from localaws.servers import aws_client

ResourcePolicies = Mapping[str, str]  # resource ARN -> policy document (JSON text)
# Calls that name a consumer by StreamARN and ConsumerName, which AWS authorizes by the consumer's own policy.
CONSUMER_CALLS_BY_NAME = ("DescribeStreamConsumer", "DeregisterStreamConsumer")


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _principal_accounts(principal: Any) -> set[str]:
    """The accounts a statement's ``Principal`` names (``"*"``: everyone)."""
    if principal == "*":
        return {"*"}
    names = _listed(principal.get("AWS", [])) if isinstance(principal, dict) else []
    return {name.split(":")[4] if name.startswith("arn:") else name for name in names}


def _matches(patterns: Any, value: str) -> bool:
    return any(fnmatch.fnmatchcase(value.lower(), str(pattern).lower()) for pattern in _listed(patterns))


def policy_effect(document: str, account: str, action: str, resource: str) -> str | None:
    """``"Deny"`` or ``"Allow"`` when a statement of the policy ``document`` matches the call (a Deny wins), else
    None."""
    effects = set()
    for statement in _listed(json.loads(document).get("Statement", [])):
        accounts = _principal_accounts(statement.get("Principal", {}))
        if not ({"*", account} & accounts):
            continue
        if _matches(statement.get("Action", []), f"kinesis:{action}") and _matches(
            statement.get("Resource", []), resource
        ):
            effects.add(statement.get("Effect"))
    return "Deny" if "Deny" in effects else ("Allow" if "Allow" in effects else None)


class AccountProxy(FaultProxy):
    """kinesis-mock with accounts: ``accounts`` maps access key ids to account ids (module doc)."""

    thread_name = "account-proxy"

    def __init__(self, upstream_url: str, accounts: Mapping[str, str]):
        super().__init__(upstream_url)
        self.accounts = dict(accounts)
        self.refused: list[tuple[str, str, str]] = []  # (account, action, error code) of each refusal
        self._owner: Any = None

    def handler_class(self) -> type[BaseHTTPRequestHandler]:
        return type("Handler", (AccountHandler,), {"proxy": self})

    def owner(self) -> Any:
        """A client of the stream owner's account, straight to the server (reads the stored policies)."""
        with self._lock:
            if self._owner is None:
                self._owner = aws_client("kinesis", f"http://{self.upstream_host}:{self.upstream_port}")
            return self._owner


class AccountHandler(FaultHandler):
    proxy: AccountProxy

    def do_POST(self) -> None:
        body = self.read_body()
        if body is None:
            return
        signed = signed_request(self.headers, body)
        account = self.proxy.accounts.get(signed.access_key_id or "", ACCOUNT_ID)
        target = self.headers.get("X-Amz-Target", "")
        if account == ACCOUNT_ID or not target.startswith(KINESIS_TARGET):
            self._forward(body)
            return
        action = target[len(KINESIS_TARGET) :]
        refusal = self._refusal(account, action, json.loads(body or b"{}"))
        if refusal is None:
            self._forward(body)
            return
        code, message = refusal
        self.proxy.refused.append((account, action, code))
        self._answer(400, {"__type": code, "message": message})

    def _refusal(self, account: str, action: str, params: dict) -> tuple[str, str] | None:
        """(code, message) AWS would answer another account's call, or None to let it through."""
        if action == "ListShards" and "NextToken" in params and "StreamARN" not in params:
            return None
        resource = (
            params.get("ConsumerARN")
            or self._named_consumer(action, params)
            or params.get("StreamARN")
            or params.get("ResourceARN")
        )
        if resource is None:
            named = params.get("StreamName", "")
            if named:
                return "ResourceNotFoundException", f"Stream {named} under account {account} not found."
            return "AccessDeniedException", f"{action} by account {account} names no StreamARN"
        document = self._policy(resource)  # a consumer's own policy: a stream's cannot name its consumers
        if document and policy_effect(document, account, action, resource) == "Allow":
            return None
        return (
            "AccessDeniedException",
            f"User: arn:aws:iam::{account}:root is not authorized to perform: kinesis:{action} on resource: "
            f"{resource} because no resource-based policy allows the kinesis:{action} action",
        )

    def _named_consumer(self, action: str, params: dict) -> str | None:
        """The ARN of the consumer a DescribeStreamConsumer or DeregisterStreamConsumer names by ``StreamARN`` and
        ``ConsumerName``: AWS authorizes such a call on the consumer, by the consumer's own policy. None for other
        calls (RegisterStreamConsumer is the stream's), and for a consumer that does not exist (the stream's policy
        decides then)."""
        if action not in CONSUMER_CALLS_BY_NAME or "ConsumerName" not in params or "StreamARN" not in params:
            return None
        try:
            described = self.proxy.owner().describe_stream_consumer(
                StreamARN=params["StreamARN"], ConsumerName=params["ConsumerName"]
            )
        except ClientError:
            return None
        return described["ConsumerDescription"]["ConsumerARN"]

    def _policy(self, resource_arn: str) -> str | None:
        """The resource's policy as the server stores it (None: none)."""
        try:
            return self.proxy.owner().get_resource_policy(ResourceARN=resource_arn).get("Policy") or None
        except ClientError:
            return None
