"""Checks that a query still has what it started with: the options that decide which rows exist, and a metadata
store that driver and executors share and that still holds what the query wrote there.

Who calls it: ``planner`` writes the source document when the query starts and refuses changed pinned options
(``check_pinned``); ``query_offsets`` refuses them for a batch that runs again and fails when a pending offset's
resolution is gone; ``completion`` fails when the source document is gone; ``stream_reader.read`` checks once per
executor process and source that it sees the document (``check_store_shared``). docs/source.md, "Offsets, the
metadata store and exact replay".
"""

from __future__ import annotations

from collections.abc import Mapping

from .. import options as opts
from ..errors import KinesisConnectorError
from ..metadata.store import MetadataStore
from ..options import OptionError
from .offsets import KinesisOffset

_seen_sources: set[tuple[str, str]] = set()  # (metadata path, source id) whose document this process has seen


class MissingMetadataError(KinesisConnectorError, RuntimeError):
    """The metadata store lost what the query wrote there (deleted, emptied, or another kinesis.metadataPath)."""


class MetadataNotSharedError(KinesisConnectorError, RuntimeError):
    """An executor does not see the metadata store the driver writes to."""


class ChangedOptionError(OptionError):
    """An option that decides which rows exist differs from the value the query started with."""


def source_document_name(source_id: str) -> str:
    """The metadata-store document the driver writes when a query starts (see the module doc)."""
    return f"source-{source_id}"


def lost_store_message(metadata_path: str, source_id: str, missing: str) -> str:
    """What to say when the metadata store lost what this query wrote there, and what to do."""
    return (
        f"the metadata store {metadata_path} has no {missing} of source {source_id}, which this query wrote "
        f"there: the store was deleted or emptied, or {opts.METADATA_PATH.name} points elsewhere than when the "
        "query started. Restore the store or point the option back at it; to start over, give the query a new "
        "checkpointLocation"
    )


def check_pinned(offset: KinesisOffset, now: Mapping[str, str]) -> None:
    """Refuse option values that change which rows exist against those the query recorded (old offsets: none)."""
    recorded_options = offset.pinned or {}
    _check_stream_option(recorded_options, now)
    for name, recorded in sorted(recorded_options.items()):
        current = now.get(name)
        if current is not None and current != recorded:
            raise ChangedOptionError(
                f"option {name} is {current!r} but this query started with {recorded!r} (recorded in its "
                f"checkpoint): it decides which rows the query reads, so it cannot change while the query lives. "
                f"Set it back to {recorded!r}, or start a new query with a new checkpointLocation"
            )


def _check_stream_option(recorded: Mapping[str, str], now: Mapping[str, str]) -> None:
    """A query's streams stay named as they were: offsets and metadata are keyed by name or by ARN
    (``stream_ids``), so a switch between the two would read other streams than the checkpoint's."""
    pair = (opts.STREAM_NAME.name, opts.STREAM_ARN.name)
    for before, after in (pair, pair[::-1]):
        if before in recorded and after in now and before not in now:
            raise ChangedOptionError(
                f"option {after} is set but this query started with {before}={recorded[before]!r} (recorded in its "
                f"checkpoint, which keys its offsets by it): set {before} back, or start a new query with a new "
                "checkpointLocation"
            )


def check_store_shared(store: MetadataStore, metadata_path: str, source_id: str, source_document: bool) -> None:
    """Fail when this executor does not see the source document the driver wrote (once per process and source;
    ``source_document``: the driver wrote one, which queries started before it existed did not)."""
    seen = (metadata_path, source_id)
    if not source_document or seen in _seen_sources:
        return
    if store.get_document(source_document_name(source_id)) is None:
        raise MetadataNotSharedError(
            f"this executor does not see the metadata store the driver writes to: {opts.METADATA_PATH.name}="
            f"{metadata_path!r} is not shared between driver and executors (unset, it is a local temp "
            "directory, which works only when they share one machine). Set it to a store every executor reaches: "
            "s3://bucket/prefix, hdfs://namenode/path, a shared mount, or use kinesis.metadataCommitterType=DYNAMODB"
        )
    _seen_sources.add(seen)
