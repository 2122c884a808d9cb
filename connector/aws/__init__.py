"""AWS, in one place: the only code that builds AWS clients (botocore) and sees secrets.

Modules, as botocore splits the job: ``settings`` (``ClientSettings``: endpoint, region, credentials, role and
timeouts, parsed once on the driver from the options and pickled into tasks; the retry policies of the options),
``credentials`` (the base credentials and the assumed role: assumed once per process and settings, refreshed
before it expires; error messages without secrets), ``clients`` (one client per process, service and settings;
the reader client whose GetRecords answers skip botocore's parser; the User-Agent built once), ``regions`` (is
a region one AWS has, by botocore's partition data: ``settings`` and the consumers' command line ask).

Who calls it: the driver-side readers (ListShards, probes), the executor-side fetchers (GetShardIterator,
GetRecords, SubscribeToShard), the metadata stores, the sink, the consumers' management, the metrics listener and
the load generator. botocore's own retries are off: ``pyspark_aws_kinesis.retry`` owns every retry, bounded by the
``kinesis.client*`` options.

Credentials, in this order of layers:
- base: the explicit keys of the options, else boto3's default chain (env, profile, web identity, container,
  instance profile), which boto3 refreshes itself;
- assumed role (``kinesis.stsRoleArn``): assumed from the base credentials with botocore's
  ``AssumeRoleCredentialFetcher`` + ``DeferredRefreshableCredentials`` (external ID, session name, duration),
  once per process and settings (``credentials.role_credentials``), shared by every client and task of that
  process and refreshed before it expires. Only Kinesis clients use the role; the metadata store's clients take
  ``settings.without_role()``.
Secrets (keys, session tokens, the external ID) never appear in a repr, a log line or an error: errors about
credentials name the role, the endpoint and what failed, and pass AWS's message through ``credentials.redact``.
"""
