"""The aws-kinesis source's driver half: ``spark.readStream.format("aws-kinesis")`` and ``spark.read``.

Modules, bottom up:
- ``offsets``: the offsets Spark checkpoints for each batch, and their JSON form;
- ``settings``: the source options, checked once and frozen for the query; which transport reads a shard;
- ``catalog``: the driver's view of each stream's shards (listings cached, reshard lineage tracked);
- ``call_window``: the query's GetRecords calls on each shard within AWS's sliding second;
- ``probe_answers``: what a probe's GetRecords answer says about a shard (records, nothing, its end, gone);
- ``probe_turns``: when each shard's next probe is due (idle shards in turn, busy ones within their second);
- ``probe_deferral``: the steady shards a batch reads without a probe first;
- ``probe``: is anything waiting at a shard's position? (one GetRecords, whose answer can be the batch's read);
- ``guards``: the checks that the metadata store and the pinned options are still the query's;
- ``health``: lag, data losses and dropped sub-records, as reads and probes report them (one writer);
- ``completion``: completing the reads a batch left unfinished;
- ``planner``: the offsets of batch k + listings + probes -> the plan of batch k+1;
- ``query_offsets``: the query's offsets as Spark hands them over (pyspark 4.0.2's pending offsets included),
  the one thing the stream reader talks to;
- ``stream_reader`` and ``batch_reader``: Spark's calls only.

``pyspark_aws_kinesis.datasource`` imports the readers from here when Spark asks for one. The executor half, which reads
a shard between two positions, is ``pyspark_aws_kinesis.fetch``.
"""
