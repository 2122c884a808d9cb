"""Executor side: read one shard between two positions, through GetRecords or enhanced fan-out.

Modules, bottom up:
- ``decode``: GetRecords answers and SubscribeToShard events -> user records as columns -> Arrow;
- ``reads``: what a read returns (``ShardRead``: where it started and stopped, why, what it found);
- ``iterators``: shard iterators, their handoff, and what a gone position or shard means;
- ``polling``: the GetRecords transport;
- ``efo``: the SubscribeToShard transport;
- ``efo_protocol``: what a task and its query's subscription broker on this host say to each other (data only);
- ``efo_broker``: one process per query and host that keeps subscriptions open across micro-batches;
- ``efo_client``: the enhanced fan-out transport tasks use (through the broker, else direct);
- ``range``: the range rules: which rows of a transport's pages a read returns, where it stops, and the result.
"""
