"""DynamoDB's calls that take several rounds, for the DynamoDB metadata store: BatchGetItem and BatchWriteItem
repeated until no item is left unprocessed, and a Query followed through its pages.

Who calls it: ``dynamodb.DynamoDBStore``, for a batch's lookups and its purge; ``call`` is the store's own (one
DynamoDB call, retried, the table created when missing), ``retry`` the policy that paces the rounds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..retry import RetriesExhaustedError, RetryPolicy

Call = Callable[..., dict[str, Any]]
Item = dict[str, Any]


def batch_get(call: Call, retry: RetryPolicy, table: str, keys: list[Item]) -> list[Item]:
    """The items of ``keys`` (strongly consistent; at most 100 keys, DynamoDB's limit), unprocessed keys asked
    again with backoff."""
    items: list[Item] = []
    request: dict[str, Any] = {table: {"Keys": keys, "ConsistentRead": True}}
    for attempt in range(retry.max_retries + 1):
        answer = call("batch_get_item", RequestItems=request)
        items.extend(answer.get("Responses", {}).get(table, []))
        request = answer.get("UnprocessedKeys") or {}
        if not request:
            return items
        if attempt < retry.max_retries:
            retry.sleep_before_retry(attempt)
    raise _unprocessed(table, retry, "BatchGetItem", len(request[table]["Keys"]))


def batch_write(call: Call, retry: RetryPolicy, table: str, requests: list[Item]) -> None:
    """``requests`` (at most 25, DynamoDB's limit), unprocessed ones sent again with backoff."""
    pending: dict[str, Any] = {table: requests}
    for attempt in range(retry.max_retries + 1):
        pending = call("batch_write_item", RequestItems=pending).get("UnprocessedItems") or {}
        if not pending:
            return
        if attempt < retry.max_retries:
            retry.sleep_before_retry(attempt)
    raise _unprocessed(table, retry, "BatchWriteItem", len(pending[table]))


def query_all(call: Call, query: dict[str, Any]) -> list[Item]:
    """Every item ``query`` finds, page after page."""
    query = dict(query)
    items: list[Item] = []
    while True:
        answer = call("query", **query)
        items.extend(answer.get("Items", []))
        if "LastEvaluatedKey" not in answer:
            return items
        query["ExclusiveStartKey"] = answer["LastEvaluatedKey"]


def _unprocessed(table: str, retry: RetryPolicy, operation: str, count: int) -> RetriesExhaustedError:
    error = RuntimeError(f"{count} items stayed unprocessed (throttled)")
    return RetriesExhaustedError(f"DynamoDB {operation} on table {table}", retry.max_retries + 1, error)
