"""The aws-kinesis source's driver half: ``spark.readStream.format("aws-kinesis")`` and ``spark.read``.

Modules, bottom up: ``offsets`` (the offsets Spark checkpoints, and their JSON form), ``settings`` (the source
options, checked once and frozen for the query; which transport reads a shard), ``probe`` (is anything waiting
at a shard's position?), ``planner`` (the offsets of batch k, the shard listing, the probes and the metadata
store -> the plan of batch k+1; completing reads a batch left unfinished; lag and what reads found),
``query_offsets`` (the query's offsets as Spark hands them over, pyspark 4.0.2's pending offsets included),
``stream_reader`` and ``batch_reader`` (Spark's calls only).

``connector.datasource`` imports the readers from here when Spark asks for one. The executor half, which reads a
shard between two positions, is ``connector.fetch``.
"""
