"""The shard the iterator-handoff tests read."""

from __future__ import annotations

SHARD = "shardId-000000000000"
