"""The aws-kinesis sink: ``df.write.format("aws-kinesis")`` and ``df.writeStream.format("aws-kinesis")``.

Modules, bottom up: ``pacing`` (what the shards' write quotas take), ``entries`` (PutRecords entries, the service's
limits, batching), ``encoded_body`` (request bodies and answers encoded with msgspec, through botocore hooks),
``shard_queues`` (the entries waiting to be sent, one queue per shard), ``put_records`` (``put_all``: paced calls,
failed-entry retries): the load generator sends through these five too. Then ``columns`` (column resolution, row
checks), ``settings`` (options), ``routing`` (the shard map), ``planning`` (plain vs aggregated records, landing
checks), ``commit`` (task counts), ``replay`` (skipping partitions a replayed micro-batch wrote whole), ``task``
(one task's write, re-sends after a reshard), ``writer`` (the Spark-facing writers).

``pyspark_aws_kinesis.datasource`` imports the writers from here; they are loaded on first use, so that importing
``pyspark_aws_kinesis.sink.put_records`` and the modules under it (the generator does) does not import pyspark.
"""

from __future__ import annotations

from typing import Any

_LAZY = {  # name -> the module of this package that defines it
    "KinesisBatchWriter": ".writer",
    "KinesisStreamWriter": ".writer",
    "SinkCommitMessage": ".commit",
    "KinesisSinkInputError": ".columns",
}
__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    import importlib

    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module '{__name__}' has no attribute '{name}'")
    return getattr(importlib.import_module(module, __name__), name)
