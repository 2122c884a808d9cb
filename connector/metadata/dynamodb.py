"""The metadata store in a DynamoDB table (``kinesis.metadataCommitterType=DYNAMODB``).

Who calls it: the same callers as every store (``metadata.store``); ``open_store`` builds it from an offset's
``metadataPath`` = ``dynamodb://<table>?region=<region>`` (``store_uri``), the endpoint from
``kinesis.dynamodb.endpointUrl``. Every write is a PutItem conditioned on ``attribute_not_exists(sourceId)`` (first
write wins), every read strongly consistent, and a purge Queries the source's partition (never a Scan); calls use
the application's own credentials and the ``kinesis.metadata*Retr*`` policy, and a missing table is created on first
need. The items, and why none expires by TTL: docs/source.md, "Offsets, the metadata store and exact replay".
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qs, urlparse

from botocore.exceptions import ClientError

from ..aws.clients import client
from ..aws.settings import ClientSettings
from ..errors import KinesisConnectorError
from ..fetch.reads import ShardRead
from ..retry import RetriesExhaustedError, RetryPolicy, error_code
from .dynamodb_paging import batch_get, batch_write, query_all
from .store import BATCH_DIGITS, MetadataConflictError, MetadataStore, batch_shard_key, check_id

SCHEME = "dynamodb://"
PARTITION_KEY = "sourceId"
SORT_KEY = "batchShard"
TTL_ATTRIBUTE = "expiresAt"
BODY = "body"
DOCUMENT_SOURCE = "#document"  # check_id refuses '#': no source id can collide with the documents' partition
MARKER = "/#document/"  # in a marker's sort key; no stream name holds '#'
NOTE = "/#note/"  # in a batch note's sort key
BATCH_GET_LIMIT = 100  # keys per BatchGetItem call (DynamoDB's limit)
BATCH_WRITE_LIMIT = 25  # requests per BatchWriteItem call (DynamoDB's limit)
TABLE_WAIT_S = 300.0
CREATE_PERMISSIONS = ("dynamodb:CreateTable", "dynamodb:DescribeTable", "dynamodb:UpdateTimeToLive")


class MetadataTableError(KinesisConnectorError, RuntimeError):
    """The metadata table is missing and cannot be created, or does not become usable."""


def store_uri(table: str, region: str) -> str:
    """The ``metadataPath`` written into the offsets for a DynamoDB store."""
    return f"{SCHEME}{table}?region={region}"


def item_key(source_id: str, sort_key: str) -> dict[str, Any]:
    """The key of an item: its partition and sort key."""
    return {PARTITION_KEY: {"S": source_id}, SORT_KEY: {"S": sort_key}}


def parse_store_uri(uri: str) -> tuple[str, str | None]:
    """(table, region) of a ``store_uri``; region None when the URI has none."""
    parsed = urlparse(uri)
    if parsed.scheme != "dynamodb" or not parsed.netloc:
        raise ValueError(f"metadata path {uri!r} is not a DynamoDB store: expected dynamodb://<table>?region=<r>")
    regions = parse_qs(parsed.query).get("region")
    return parsed.netloc, regions[0] if regions else None


class DynamoDBStore(MetadataStore):
    """Shard reads and documents as items of one table; picklable (clients are looked up per call)."""

    def __init__(self, table: str, settings: ClientSettings):
        self.table = table
        self._settings = settings

    @classmethod
    def from_uri(
        cls,
        uri: str,
        client_settings: ClientSettings | None,
        endpoint_url: str | None = None,
        retry: RetryPolicy | None = None,
    ) -> DynamoDBStore:
        """The store a ``store_uri`` names, reached with ``client_settings`` (the application's credentials)."""
        table, region = parse_store_uri(uri)
        base = client_settings or ClientSettings(region=region or "us-east-1")
        settings = replace(base, region=region or base.region, endpoint_url=endpoint_url, retry=retry or base.retry)
        return cls(table, settings)

    def __repr__(self) -> str:
        return f"DynamoDBStore({store_uri(self.table, self._settings.region)}, {self._settings.where()})"

    # --- calls ------------------------------------------------------------------------------------------------

    @property
    def _retry(self) -> RetryPolicy:
        return self._settings.retry

    def _call(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        """One DynamoDB call, retried by the policy; a missing table is created once and the call made again."""
        method = getattr(client("dynamodb", self._settings), operation)
        what = f"DynamoDB {operation} on table {self.table} ({self._settings.where()})"
        try:
            return self._retry.call(method, what=what, **kwargs)
        except ClientError as exc:
            if error_code(exc) != "ResourceNotFoundException":
                raise
        self.ensure_table()
        return self._retry.call(method, what=what, **kwargs)

    # --- the table --------------------------------------------------------------------------------------------

    def ensure_table(self) -> None:
        """Create the table (on demand, the store's keys, TTL on ``expiresAt``) unless it exists; wait until
        it is ACTIVE. Raises MetadataTableError naming the table and the permission when the credentials may not."""
        ddb = client("dynamodb", self._settings)
        try:
            self._retry.call(
                ddb.create_table,
                TableName=self.table,
                AttributeDefinitions=[
                    {"AttributeName": PARTITION_KEY, "AttributeType": "S"},
                    {"AttributeName": SORT_KEY, "AttributeType": "S"},
                ],
                KeySchema=[
                    {"AttributeName": PARTITION_KEY, "KeyType": "HASH"},
                    {"AttributeName": SORT_KEY, "KeyType": "RANGE"},
                ],
                BillingMode="PAY_PER_REQUEST",
                what=f"DynamoDB CreateTable {self.table}",
            )
        except (ClientError, RetriesExhaustedError) as exc:
            if error_code(exc) == "ResourceInUseException":  # it exists (or another process is creating it)
                self._wait_active(ddb)
                return
            raise self._cannot_create(exc) from exc
        self._wait_active(ddb)
        try:
            self._retry.call(
                ddb.update_time_to_live,
                TableName=self.table,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
                what=f"DynamoDB UpdateTimeToLive {self.table}",
            )
        except (ClientError, RetriesExhaustedError) as exc:
            raise self._cannot_create(exc) from exc

    def _cannot_create(self, exc: Exception) -> MetadataTableError:
        return MetadataTableError(
            f"the metadata table {self.table!r} (option kinesis.dynamodb.tableName) does not exist in "
            f"{self._settings.where()} and could not be created: {error_code(exc)}: {exc}. Create it (partition key "
            "sourceId, sort key batchShard, both strings; see docs/source.md) or allow the application's "
            f"credentials {', '.join(CREATE_PERMISSIONS)} on it"
        )

    def _wait_active(self, ddb: Any) -> None:
        deadline = time.monotonic() + TABLE_WAIT_S
        while True:
            try:
                answer = self._retry.call(ddb.describe_table, TableName=self.table, what=f"DescribeTable {self.table}")
                status = answer["Table"]["TableStatus"]
            except (ClientError, RetriesExhaustedError) as exc:
                if error_code(exc) != "ResourceNotFoundException":
                    raise self._cannot_create(exc) from exc
                status = "CREATING"
            if status == "ACTIVE":
                return
            if time.monotonic() > deadline:
                raise MetadataTableError(f"the metadata table {self.table!r} is still {status} after {TABLE_WAIT_S} s")
            time.sleep(0.5)

    # --- items ------------------------------------------------------------------------------------------------

    def _shard_key(self, source_id: str, batch_id: int, stream: str, shard_id: str) -> dict[str, Any]:
        check_id("source id", source_id)
        check_id("shard id", shard_id)
        return item_key(source_id, batch_shard_key(batch_id, stream, shard_id))

    def _put(self, key: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        """Write ``body`` under ``key`` unless an item is there; returns the stored body (ours or the winner's)."""
        item = {**key, BODY: {"S": json.dumps(body, sort_keys=True)}}
        try:
            self._call(
                "put_item",
                TableName=self.table,
                Item=item,
                ConditionExpression=f"attribute_not_exists({PARTITION_KEY})",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return body
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            winner = exc.response.get("Item")
        if winner is not None:
            return json.loads(winner[BODY]["S"])
        stored = self._get(key)  # servers that do not return the item: read it (strongly consistent)
        if stored is None:  # deleted between our attempt and our read: only a purge does that
            raise MetadataConflictError(f"metadata item {key} in table {self.table} vanished while being written")
        return stored

    def _get(self, key: dict[str, Any]) -> dict[str, Any] | None:
        answer = self._call("get_item", TableName=self.table, Key=key, ConsistentRead=True)
        item = answer.get("Item")
        return json.loads(item[BODY]["S"]) if item else None

    def put_shard_read(self, source_id: str, batch_id: int, read: ShardRead) -> ShardRead:
        key = self._shard_key(source_id, batch_id, read.stream, read.shard_id)
        return ShardRead.from_json(self._put(key, read.to_json()))

    def get_shard_read(self, source_id: str, batch_id: int, stream: str, shard_id: str) -> ShardRead | None:
        body = self._get(self._shard_key(source_id, batch_id, stream, shard_id))
        return ShardRead.from_json(body) if body is not None else None

    def get_shard_reads(
        self, source_id: str, batch_id: int, shards: list[tuple[str, str]]
    ) -> dict[tuple[str, str], ShardRead | None]:
        """BatchGetItem, 100 keys per call (strongly consistent), unprocessed keys retried with backoff."""
        from ..parallel import parallel_map

        by_sort_key = {batch_shard_key(batch_id, *shard): shard for shard in shards}
        keys = [self._shard_key(source_id, batch_id, *shard) for shard in shards]
        chunks = [keys[i : i + BATCH_GET_LIMIT] for i in range(0, len(keys), BATCH_GET_LIMIT)]
        found: dict[tuple[str, str], ShardRead | None] = dict.fromkeys(shards)
        for items in parallel_map(lambda chunk: batch_get(self._call, self._retry, self.table, chunk), chunks):
            for item in items:
                found[by_sort_key[item[SORT_KEY]["S"]]] = ShardRead.from_json(json.loads(item[BODY]["S"]))
        return found

    def put_document(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._put(item_key(DOCUMENT_SOURCE, check_id("document", name)), body)

    def get_document(self, name: str) -> dict[str, Any] | None:
        return self._get(item_key(DOCUMENT_SOURCE, check_id("document", name)))

    def put_batch_document(self, source_id: str, batch_id: int, name: str, body: dict[str, Any]) -> dict[str, Any]:
        check_id("source id", source_id)
        marker = f"{batch_id:0{BATCH_DIGITS}d}{MARKER}{check_id('document', name)}"
        self._put(item_key(source_id, marker), {"document": name})
        return self.put_document(name, body)

    def _note_key(self, source_id: str, batch_id: int, name: str) -> dict[str, Any]:
        check_id("source id", source_id)
        return item_key(source_id, f"{batch_id:0{BATCH_DIGITS}d}{NOTE}{check_id('note', name)}")

    def put_batch_note(self, source_id: str, batch_id: int, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._put(self._note_key(source_id, batch_id, name), body)

    def get_batch_note(self, source_id: str, batch_id: int, name: str) -> dict[str, Any] | None:
        return self._get(self._note_key(source_id, batch_id, name))

    # --- retention --------------------------------------------------------------------------------------------

    def purge(self, source_id: str, below_batch: int) -> int:
        """Query the source's partition for sort keys below ``below_batch`` (zero-padded batch ids sort like
        numbers), delete them 25 at a time; returns how many batches were deleted."""
        check_id("source id", source_id)
        sort_keys = self._sort_keys_below(source_id, f"{below_batch:0{BATCH_DIGITS}d}")
        documents = [key.split(MARKER, 1)[1] for key in sort_keys if MARKER in key]
        # documents first: an interrupted purge keeps the markers that name them for the next purge
        deletes = [{"DeleteRequest": {"Key": item_key(DOCUMENT_SOURCE, name)}} for name in documents]
        deletes += [{"DeleteRequest": {"Key": item_key(source_id, key)}} for key in sort_keys]
        for i in range(0, len(deletes), BATCH_WRITE_LIMIT):
            batch_write(self._call, self._retry, self.table, deletes[i : i + BATCH_WRITE_LIMIT])
        return len({key[:BATCH_DIGITS] for key in sort_keys})

    def _sort_keys_below(self, source_id: str, bound: str) -> list[str]:
        query: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "#p = :source AND #s < :bound",
            "ExpressionAttributeNames": {"#p": PARTITION_KEY, "#s": SORT_KEY},
            "ExpressionAttributeValues": {":source": {"S": source_id}, ":bound": {"S": bound}},
            "ProjectionExpression": "#s",
            "ConsistentRead": True,
        }
        return [item[SORT_KEY]["S"] for item in query_all(self._call, query)]
