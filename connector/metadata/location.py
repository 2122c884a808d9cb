"""Where the metadata store is, from the options: ``metadata_location`` (a path, or ``dynamodb://`` for a table),
the source's default path, and ``StoreLocation`` (the location with the store's endpoints and retries, picklable).

Who calls it: ``source.settings`` (the source's store: a private temp directory when no path is given) and
``sink.settings`` (the notes of ``kinesis.sink.skipReplayedPartitions``: a path or table must be given).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import options as opts
from ..aws.settings import ClientSettings, retry_policy
from ..options import OptionError, ParsedOptions
from ..private import open_private_dir, user_temp_path
from ..retry import RetryPolicy

if TYPE_CHECKING:
    from .store import MetadataStore

DEFAULT_METADATA_DIR = "aws-kinesis-metadata"
DYNAMODB_OPTIONS = (opts.DYNAMODB_TABLE_NAME, opts.DYNAMODB_ENDPOINT_URL, opts.DYNAMODB_REGION)
METADATA_RETRY_OPTIONS = (
    opts.METADATA_NUM_RETRIES,
    opts.METADATA_RETRY_INTERVALS_MS,
    opts.METADATA_MAX_RETRY_INTERVAL_MS,
)


def default_metadata_path() -> str:
    """``<temp dir>/aws-kinesis-metadata-<uid>``, created 0700 (works when driver and executors share a machine and
    a user: local mode). Raises OptionError naming ``kinesis.metadataPath`` when it is a symbolic link or not this
    user's alone: another local user could read or forge where each batch stopped. Checked once, on the driver;
    the temp dir's sticky bit keeps the name ours afterwards."""
    path = user_temp_path(DEFAULT_METADATA_DIR)
    try:
        os.close(open_private_dir(path))
    except OSError as exc:
        raise OptionError(
            f"the default of option {opts.METADATA_PATH.name} cannot be used: {exc}; set "
            f"{opts.METADATA_PATH.name} (beside the checkpoint) or remove {path}"
        ) from None
    return path


def metadata_location(
    parsed: ParsedOptions, client: ClientSettings, default: Callable[[], str] = default_metadata_path
) -> str:
    """The store's location: ``dynamodb://<table>?region=<r>`` for ``DYNAMODB``, else the path option or
    ``default()`` (which may raise OptionError instead). Raises OptionError for a missing table name or options of
    the other store."""
    committer = opts.METADATA_COMMITTER_TYPE.name
    if parsed[opts.METADATA_COMMITTER_TYPE.key] != "DYNAMODB":
        stray = [option.name for option in DYNAMODB_OPTIONS if parsed.is_set(option.key)]
        if stray:
            raise OptionError(
                f"option {stray[0]} applies only to {committer}=DYNAMODB (it is "
                f"{parsed[opts.METADATA_COMMITTER_TYPE.key]}): set {committer}=DYNAMODB or remove it"
            )
        return parsed[opts.METADATA_PATH.key] or default()
    table = parsed[opts.DYNAMODB_TABLE_NAME.key]
    if table is None:
        raise OptionError(
            f"option {opts.DYNAMODB_TABLE_NAME.name} is required with {committer}=DYNAMODB: the metadata table"
        )
    if parsed.is_set(opts.METADATA_PATH.key):
        raise OptionError(
            f"option {opts.METADATA_PATH.name} is not used with {committer}=DYNAMODB (the table "
            f"{opts.DYNAMODB_TABLE_NAME.name}={table!r} holds the metadata): remove one of them"
        )
    from .dynamodb import store_uri

    return store_uri(table, parsed[opts.DYNAMODB_REGION.key] or client.region)


@dataclass(frozen=True)
class StoreLocation:
    """A metadata store as the options name it, opened where it is used (``open``)."""

    path: str  # a path, or dynamodb://<table>?region=<r> (metadata_location)
    s3_endpoint_url: str | None
    dynamodb_endpoint_url: str | None
    retry: RetryPolicy

    @classmethod
    def from_options(
        cls, parsed: ParsedOptions, client: ClientSettings, default: Callable[[], str] = default_metadata_path
    ) -> StoreLocation:
        return cls(
            metadata_location(parsed, client, default),
            parsed[opts.METADATA_S3_ENDPOINT_URL.key],
            parsed[opts.DYNAMODB_ENDPOINT_URL.key],
            retry_policy(parsed, *METADATA_RETRY_OPTIONS),
        )

    def open(self, client: ClientSettings) -> MetadataStore:
        """The store, with the application's own credentials (never the stream owner's role: the table or bucket
        lives with the job). Cheap: no I/O until used."""
        from . import open_store

        return open_store(
            self.path,
            client.without_role(),
            self.s3_endpoint_url,
            dynamodb_endpoint_url=self.dynamodb_endpoint_url,
            retry=self.retry,
        )
