"""The options of both sides: the stream, the endpoint and region, credentials and the assumed role, the AWS
client's retries. ``aws.settings.ClientSettings.from_options`` reads most of them."""

from __future__ import annotations

from .kinds import BOOL, ENDPOINT, EXTERNAL_ID, REGION_NAME, ROLE_ARN, SESSION_NAME, STRING, integer
from .registry import Option, Side, add

STREAM_NAME = add(
    Option(
        "kinesis.streamName",
        STRING,
        None,
        "Stream to read (source: one or more, comma-separated; each row carries its `streamName`) or the default "
        "stream to write (sink; a `streamName` column overrides it per row).",
        Side.BOTH,
        default_doc="required for the source (or kinesis.streamARN)",
    )
)
STREAM_ARN = add(
    Option(
        "kinesis.streamARN",
        STRING,
        None,
        "Stream(s) by ARN, `arn:aws:kinesis:<region>:<account>:stream/<name>`, instead of "
        "`kinesis.streamName`: the source reads one or more (comma-separated), the sink writes to one. Every call "
        "names the ARN, which a stream of another account shared by a resource policy needs; the region is the "
        "ARN's. Offsets and metadata are keyed by the ARN; rows carry the stream's name.",
        Side.BOTH,
        default_doc="none (give it or kinesis.streamName)",
    )
)
ENDPOINT_URL = add(
    Option(
        "kinesis.endpointUrl",
        ENDPOINT,
        None,
        "Kinesis endpoint, e.g. `https://kinesis.us-west-2.amazonaws.com` or a local server's URL.",
        Side.BOTH,
        default_doc="the region's AWS endpoint",
    )
)
ALLOW_HTTP_ENDPOINTS = add(
    Option(
        "kinesis.allowHttpEndpoints",
        BOOL,
        False,
        "Accept `http://` endpoint URLs (`kinesis.endpointUrl`, `kinesis.stsEndpointUrl`, "
        "`kinesis.metadata.s3EndpointUrl`, `kinesis.dynamodb.endpointUrl`) for hosts other than loopback ones. "
        "Requests are signed but not encrypted over http: record data and temporary credentials from STS travel "
        "in clear. Loopback hosts (`localhost`, `127.0.0.0/8`, `::1`) may use http without it.",
        Side.BOTH,
    )
)
REGION = add(
    Option(
        "kinesis.region",
        STRING,
        None,
        "AWS region of the stream. When absent it is inferred from the endpoint (`kinesis.<region>.amazonaws.com`), "
        "`us-east-1` for a loopback endpoint, else the AWS SDK's default region (AWS_REGION, config file).",
        Side.BOTH,
        default_doc="inferred",
    )
)
ALLOW_UNKNOWN_REGION = add(
    Option(
        "kinesis.allowUnknownRegion",
        BOOL,
        False,
        "Accept a `kinesis.region` / `kinesis.kinesisRegion` that this botocore's partition data does not list (a "
        'region newer than the installed botocore). Otherwise such a region fails at `load()` with a "did you '
        'mean"; a loopback endpoint (a local server) accepts any region.',
        Side.BOTH,
    )
)
ACCESS_KEY_ID = add(
    Option(
        "kinesis.awsAccessKeyId",
        STRING,
        None,
        "Access key id; with `kinesis.awsSecretKey`. Absent: the AWS SDK's default credential chain.",
        Side.BOTH,
        secret=True,
        default_doc="default chain",
    )
)
SECRET_KEY = add(
    Option(
        "kinesis.awsSecretKey",
        STRING,
        None,
        "Secret access key; with `kinesis.awsAccessKeyId`.",
        Side.BOTH,
        secret=True,
        default_doc="default chain",
    )
)
SESSION_TOKEN = add(
    Option(
        "kinesis.sessionToken",
        STRING,
        None,
        "Session token of temporary credentials; with the two key options.",
        Side.BOTH,
        secret=True,
        default_doc="none",
        requires="kinesis.awsaccesskeyid",
    )
)
STS_ROLE_ARN = add(
    Option(
        "kinesis.stsRoleArn",
        ROLE_ARN,
        None,
        "Role to assume for Kinesis (e.g. the stream owner's cross-account role), from the credentials above (keys "
        "or the default chain). Assumed once per process and refreshed before it expires. The metadata store keeps "
        "the credentials above.",
        Side.BOTH,
        default_doc="none: no role",
    )
)
STS_SESSION_NAME = add(
    Option(
        "kinesis.stsSessionName",
        SESSION_NAME,
        None,
        "Role session name (shown in CloudTrail); with `kinesis.stsRoleArn`.",
        Side.BOTH,
        default_doc="`aws-kinesis-<stream>-<8 hex>`, the hex drawn once per driver process",
        requires="kinesis.stsrolearn",
    )
)
STS_EXTERNAL_ID = add(
    Option(
        "kinesis.stsExternalId",
        EXTERNAL_ID,
        None,
        "External ID the role's trust policy demands (`sts:ExternalId`); with `kinesis.stsRoleArn`.",
        Side.BOTH,
        secret=True,
        requires="kinesis.stsrolearn",
    )
)
STS_DURATION_SEC = add(
    Option(
        "kinesis.stsDurationSec",
        integer(900, 43200),
        3600,
        "Lifetime of the assumed role's credentials (at most the role's maximum session duration); they are "
        "refreshed when a third of it (at most 15 min) is left; with `kinesis.stsRoleArn`.",
        Side.BOTH,
        unit="s",
        requires="kinesis.stsrolearn",
    )
)
STS_ENDPOINT_URL = add(
    Option(
        "kinesis.stsEndpointUrl",
        ENDPOINT,
        None,
        "STS endpoint for the AssumeRole call (a VPC endpoint or a local server); with `kinesis.stsRoleArn`.",
        Side.BOTH,
        default_doc="the regional STS endpoint of `kinesis.region`",
        requires="kinesis.stsrolearn",
    )
)
KINESIS_REGION = add(
    Option(
        "kinesis.kinesisRegion",
        REGION_NAME,
        None,
        "Region of the stream when it differs from `kinesis.region` (which then serves STS and the metadata "
        "store): Kinesis calls are sent to and signed for this region.",
        Side.BOTH,
        default_doc="`kinesis.region`",
    )
)
CLIENT_NUM_RETRIES = add(
    Option(
        "kinesis.clientNumRetries",
        integer(0, 100),
        3,
        "Retries of a throttled, failed (5xx) or timed-out AWS call before the task fails.",
        Side.BOTH,
    )
)
CLIENT_RETRY_INTERVALS_MS = add(
    Option(
        "kinesis.clientRetryIntervalsMs",
        integer(0),
        1000,
        "First retry's backoff; each further retry doubles it (with jitter), up to `kinesis.clientMaxRetryIntervalMs`.",
        Side.BOTH,
        unit="ms",
    )
)
CLIENT_MAX_RETRY_INTERVAL_MS = add(
    Option(
        "kinesis.clientMaxRetryIntervalMs",
        integer(0),
        10000,
        "Longest backoff between two retries.",
        Side.BOTH,
        unit="ms",
    )
)
