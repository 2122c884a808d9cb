"""AWS, in one place: the only code that builds AWS clients (botocore) and sees secrets.

Modules: ``settings`` (``ClientSettings``: endpoint, region, credentials, role and timeouts, parsed once on the
driver from the options and pickled into tasks; the options' retry policies), ``credentials`` (the explicit keys or
the default chain, and the assumed role, once per process and settings and refreshed before it expires; error
messages without secrets), ``clients`` (one client per process, service and settings; the reader client whose
GetRecords answers skip botocore's parser), ``regions`` (is a region one AWS has, by botocore's partition data).

Who calls it: every module that calls AWS (the driver's readers, the executors' fetchers, the metadata stores, the
sink, the consumers' management, the metrics listener, the load generator). botocore's own retries are off:
``pyspark_aws_kinesis.retry`` owns every retry. Only Kinesis clients assume the role; the layers of credentials and
how secrets are kept out of reprs, logs and errors: docs/source.md, "Credentials", and docs/security.md.
"""
