"""Where each batch stopped reading each shard: the metadata store (every write first-write-wins).

Modules: ``store`` (the interface, ``MetadataStore``, and ``PathStore``, a store over a tree of small JSON files),
``filesystem`` (path stores on a local or mounted filesystem, and on any filesystem pyarrow opens, e.g. HDFS),
``s3`` (a path store on S3, with conditional puts), ``dynamodb`` (items in a DynamoDB table,
``kinesis.metadataCommitterType=DYNAMODB``; ``dynamodb_paging``: its calls that take several rounds). ``open_store``
picks the one an offset's ``metadataPath`` names; the backends are imported only when picked. What a store keeps per
shard is a ``fetch.reads.ShardRead``.
"""

from __future__ import annotations

from typing import Any

from .store import MetadataStore

__all__ = ["MetadataStore", "open_store"]


def open_store(
    path: str,
    client_settings: Any = None,
    s3_endpoint_url: str | None = None,
    *,
    dynamodb_endpoint_url: str | None = None,
    retry: Any = None,
) -> MetadataStore:
    """The store an offset's ``metadataPath`` names: ``dynamodb://<table>?region=<region>`` (DynamoDB, endpoint
    from ``kinesis.dynamodb.endpointUrl``), ``s3://`` through boto3, a local path or ``file://``, else any
    filesystem pyarrow knows (``hdfs://``, ``viewfs://``). ``client_settings`` are the application's own
    credentials; ``retry`` (a ``RetryPolicy``) governs the AWS stores' calls. Cheap: no I/O until used."""
    if path.startswith("dynamodb://"):
        from .dynamodb import DynamoDBStore

        return DynamoDBStore.from_uri(path, client_settings, dynamodb_endpoint_url, retry)
    if path.startswith(("s3://", "s3a://", "s3n://")):
        from .s3 import S3Store

        return S3Store(path, client_settings, s3_endpoint_url, retry)
    from .filesystem import ArrowFileSystemStore, LocalStore

    if "://" not in path or path.startswith("file://"):
        return LocalStore(path.removeprefix("file://"))
    return ArrowFileSystemStore(path)
