"""Reading a shard through enhanced fan-out (SubscribeToShard; Flink's ``reader/fanout``), its subscriptions kept
open across micro-batches by one broker process per query and host.

Modules, bottom up:
- ``framing``: the event-stream messages of a SubscribeToShard answer, each read in one sized read;
- ``subscriber``: one consumer+shard's subscription as decoded Pages (``ShardSubscriber``, ``SubscribePacer``);
- ``protocol``: what a task and its query's subscription broker on this host say to each other (data only);
- ``broker``: the process per query and host that keeps subscriptions open across micro-batches;
- ``client``: the transport tasks use (``BrokeredSubscriber``: through the broker, else direct).
"""
