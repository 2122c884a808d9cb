"""A path store on S3: conditional puts (``If-None-Match: *``) make every write first-write-wins.

Who calls it: ``open_store``, for ``s3://``. A 412 means another attempt's object is there (we lost); a 409 (a
concurrent conditional write of the key in flight) is retried. The client has the application's own credentials,
the ``kinesis.metadata*Retr*`` policy and ``kinesis.metadata.s3EndpointUrl`` when set. Stores that ignore
``If-None-Match``: docs/source.md, "First write wins, store by store".
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from urllib.parse import urlparse

from botocore.exceptions import ClientError

from ..aws.clients import client
from ..aws.settings import ClientSettings
from ..retry import RetryPolicy, error_code
from .store import PathStore


class S3Store(PathStore):
    """JSON objects under ``s3://bucket/prefix``."""

    def __init__(
        self,
        root: str,
        settings: ClientSettings | None,
        s3_endpoint_url: str | None = None,
        retry: RetryPolicy | None = None,
    ):
        super().__init__(root)
        parsed = urlparse(self.root)
        self.bucket = parsed.netloc
        self.prefix = parsed.path.strip("/")
        base = settings or ClientSettings(region="us-east-1")
        self._settings = replace(base, endpoint_url=s3_endpoint_url, retry=retry or base.retry)

    @property
    def _s3(self) -> Any:
        # Looked up per call, never held: the store is pickled into tasks and clients cannot be.
        return client("s3", self._settings)

    def _key(self, relative: str) -> str:
        return f"{self.prefix}/{relative}" if self.prefix else relative

    def _read(self, relative: str) -> bytes | None:
        try:
            answer = self._settings.retry.call(
                self._s3.get_object, Bucket=self.bucket, Key=self._key(relative), what=f"S3 GetObject {relative}"
            )
        except ClientError as exc:
            if error_code(exc) in ("NoSuchKey", "404"):
                return None
            raise
        return answer["Body"].read()

    def _create(self, relative: str, body: bytes) -> bool:
        try:
            self._settings.retry.call(
                self._s3.put_object,
                Bucket=self.bucket,
                Key=self._key(relative),
                Body=body,
                IfNoneMatch="*",
                what=f"S3 PutObject {relative}",
            )
            return True
        except ClientError as exc:
            # 412: the object exists, another attempt won. A 409 ConditionalRequestConflict (a concurrent write
            # of the same key still in flight) is retried by the policy instead: the next try meets the winner.
            if error_code(exc) == "PreconditionFailed":
                return False
            raise

    def _list_dirs(self, relative: str) -> list[str]:
        prefix = self._key(relative).rstrip("/") + "/"
        names: list[str] = []
        for page in self._s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix, Delimiter="/"
        ):
            names.extend(entry["Prefix"][len(prefix) :].rstrip("/") for entry in page.get("CommonPrefixes", []))
        return names

    def _list_files(self, relative: str) -> list[str]:
        prefix = self._key(relative).rstrip("/") + "/"
        names: list[str] = []
        for page in self._s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix, Delimiter="/"
        ):
            names.extend(entry["Key"][len(prefix) :] for entry in page.get("Contents", []))
        return names

    def _delete_file(self, relative: str) -> None:
        # S3 answers a DeleteObject of a missing key with success
        self._settings.retry.call(
            self._s3.delete_object, Bucket=self.bucket, Key=self._key(relative), what=f"S3 DeleteObject {relative}"
        )

    def _delete_tree(self, relative: str) -> None:
        prefix = self._key(relative).rstrip("/") + "/"
        for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            keys = [{"Key": entry["Key"]} for entry in page.get("Contents", [])]
            if keys:
                self._s3.delete_objects(Bucket=self.bucket, Delete={"Objects": keys, "Quiet": True})
