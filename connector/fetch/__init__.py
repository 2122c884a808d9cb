"""Executor side: read one shard between two positions, through GetRecords or enhanced fan-out.

Modules, bottom up: ``decode`` (GetRecords answers and SubscribeToShard events -> user records as columns ->
Arrow), ``iterators`` (shard iterators, their handoff, and what a gone position or shard means), ``polling``
(the GetRecords transport), ``efo`` (the SubscribeToShard transport), ``efo_broker`` (one process per host that
keeps subscriptions open across micro-batches) and ``efo_client`` (the transport tasks use: through the broker,
else direct), ``range`` (the range rules: which rows of a transport's pages a read returns, where it stops, and
the result it records).
"""
