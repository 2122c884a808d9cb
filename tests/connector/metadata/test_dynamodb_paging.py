"""``pyspark_aws_kinesis.metadata.dynamodb_paging``: BatchGetItem and BatchWriteItem repeated until nothing is left
unprocessed (with backoff, then a clear error), and a Query followed through its pages. The DynamoDB calls are
scripted answers: no server (the store against moto: test_dynamodb.py)."""

from __future__ import annotations

from typing import Any

import pytest

from pyspark_aws_kinesis.metadata.dynamodb_paging import batch_get, batch_write, query_all
from pyspark_aws_kinesis.retry import RetriesExhaustedError, RetryPolicy

TABLE = "meta"


class Calls:
    """Answers each call with the next scripted answer; records the calls."""

    def __init__(self, *answers: dict[str, Any]):
        self.answers = list(answers)
        self.made: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, operation: str, **params: Any) -> dict[str, Any]:
        self.made.append((operation, params))
        return self.answers.pop(0)


class CountedSleeps(RetryPolicy):
    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)  # type: ignore[attr-defined]


def _retry(max_retries: int = 2) -> CountedSleeps:
    retry = CountedSleeps(max_retries=max_retries, initial_interval_ms=10, max_interval_ms=40)
    object.__setattr__(retry, "slept", [])
    return retry


def _key(n: int) -> dict[str, Any]:
    return {"sourceId": {"S": "s"}, "batchShard": {"S": f"k{n}"}}


def test_unprocessed_keys_are_asked_again_until_every_item_came() -> None:
    retry = _retry()
    calls = Calls(
        {"Responses": {TABLE: [{"n": 1}]}, "UnprocessedKeys": {TABLE: {"Keys": [_key(2)], "ConsistentRead": True}}},
        {"Responses": {TABLE: [{"n": 2}]}},
    )
    assert batch_get(calls, retry, TABLE, [_key(1), _key(2)]) == [{"n": 1}, {"n": 2}]
    first, again = (params["RequestItems"][TABLE] for _, params in calls.made)
    assert first == {"Keys": [_key(1), _key(2)], "ConsistentRead": True}
    assert again["Keys"] == [_key(2)]
    assert len(retry.slept) == 1  # type: ignore[attr-defined]


def test_keys_that_stay_unprocessed_fail_naming_the_table_and_the_count() -> None:
    retry = _retry(max_retries=1)
    stuck = {"UnprocessedKeys": {TABLE: {"Keys": [_key(1), _key(2)]}}}
    with pytest.raises(RetriesExhaustedError, match=r"DynamoDB BatchGetItem on table meta failed after 2 attempts"):
        batch_get(Calls(stuck, stuck), retry, TABLE, [_key(1), _key(2)])
    assert len(retry.slept) == 1  # type: ignore[attr-defined]  # none after the last attempt


def test_unprocessed_writes_are_sent_again_then_fail_if_they_stay() -> None:
    put = [{"PutRequest": {"Item": {"n": 1}}}, {"PutRequest": {"Item": {"n": 2}}}]
    calls = Calls({"UnprocessedItems": {TABLE: put[1:]}}, {"UnprocessedItems": {}})
    batch_write(calls, _retry(), TABLE, put)
    assert [params["RequestItems"][TABLE] for _, params in calls.made] == [put, put[1:]]
    stuck = {"UnprocessedItems": {TABLE: put}}
    with pytest.raises(RetriesExhaustedError, match=r"BatchWriteItem on table meta .*2 items stayed unprocessed"):
        batch_write(Calls(stuck, stuck, stuck), _retry(), TABLE, put)


def test_a_query_is_followed_through_its_pages() -> None:
    calls = Calls(
        {"Items": [{"n": 1}, {"n": 2}], "LastEvaluatedKey": {"k": 2}},
        {"Items": [], "LastEvaluatedKey": {"k": 3}},
        {"Items": [{"n": 3}]},
    )
    query = {"TableName": TABLE, "KeyConditionExpression": "sourceId = :s"}
    assert query_all(calls, query) == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert [params.get("ExclusiveStartKey") for _, params in calls.made] == [None, {"k": 2}, {"k": 3}]
    assert "ExclusiveStartKey" not in query  # the caller's query is left as it was
