"""Executor-side shard readers: polling (GetRecords) now, enhanced fan-out later."""
