"""Reading a shard with GetRecords (the default transport; Flink's ``reader/polling``), paced to the shard's quota.

Modules, bottom up:
- ``settings``: how the transport asks (``PollingSettings``: records per call, interval, first call's ``Limit``);
- ``memory``: what this process learnt of each shard for its next read (``ShardMemory``, ``SHARD_MEMORY``);
- ``pacing``: when the next call may start (``CallPacer``: interval and pay-back; ``ReadBackoff``: quota refusals);
- ``transport``: the ``ShardTransport`` over GetShardIterator + GetRecords (``GetRecordsTransport``).
"""
