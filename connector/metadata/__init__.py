"""Where each batch stopped reading each shard: the store interface and its filesystem and S3 implementations."""

from .store import MetadataStore, ShardRead, open_store

__all__ = ["MetadataStore", "ShardRead", "open_store"]
