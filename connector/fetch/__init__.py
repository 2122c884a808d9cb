"""Executor side: read one shard between two positions, through GetRecords or enhanced fan-out.

Modules, bottom up:
- ``schema``: the rows' schema as Spark's DDL (for ``load()``, without pyarrow);
- ``arrow_columns``: the Arrow columns of a decoded page, built cheaply from its lists;
- ``decode``: GetRecords answers and SubscribeToShard events -> user records as columns -> Arrow;
- ``reads``: what a read returns (``ShardRead``: where it started and stopped, why, what it found);
- ``iterators``: shard iterators, their handoff, and what a gone position or shard means;
- ``range``: the range rules: which rows of a transport's pages a read returns, where it stops, and the result;
- ``polling/``: the GetRecords transport and its pacing to the shard's quota (a package);
- ``fanout/``: the enhanced fan-out (SubscribeToShard) transport, its subscriptions kept open across micro-batches
  by one broker process per query and host (a package).
"""
