"""What can be checked before anything is sent, and AWS's refusals turned into one line that names the flag.

Who calls it: ``kinesis_generator.sender.run``, before it builds its client (``check_profile``, ``resolve_region``,
``check_credentials``), then with the client (``check_stream``: one ListShards, which also gives the open
shards that the stream's write limit and ``--aggregate`` need), and for an error that stopped a run midway
(``explain``). Every message starts with the flag (or the value) at fault and says what to do; the connector's
own messages name its ``kinesis.*`` options, which a generator user never wrote.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError, ParamValidationError
from botocore.exceptions import ConnectionError as BotocoreConnectionError

from kinesis_generator.errors import GeneratorError, TargetError, UsageError
from pyspark_aws_kinesis.aws.regions import unknown_region_line
from pyspark_aws_kinesis.aws.settings import infer_region, sdk_default_region
from pyspark_aws_kinesis.retry import (
    RETRYABLE_ERROR_CODES,
    RetriesExhaustedError,
    RetryPolicy,
    error_code,
    error_message,
)
from pyspark_aws_kinesis.shards import Shard, StreamNotFoundError, list_shards, open_shards
from pyspark_aws_kinesis.sink.entries import DEFAULT_LIMITS, RecordLimits
from pyspark_aws_kinesis.sink.put_records import PutRecordsFailedError
from pyspark_aws_kinesis.sink.stream_limits import describe_limits

# The checks' own retries: a few quick ones, so an endpoint that does not answer is reported in seconds.
PREFLIGHT_RETRY = RetryPolicy(max_retries=2, initial_interval_ms=200, max_interval_ms=1000)
NO_CREDENTIALS = (
    "no AWS credentials found (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, --profile, ~/.aws/credentials, "
    "a container or instance role): set the keys or pass --profile"
)
_BAD_CREDENTIALS = frozenset(
    {
        "UnrecognizedClientException",
        "InvalidSignatureException",
        "IncompleteSignature",
        "InvalidClientTokenId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "ExpiredTokenException",
    }
)
_LISTING_DENIED = frozenset({"AccessDeniedException", "AccessDenied"})
_DENIED = _LISTING_DENIED | {"KMSAccessDeniedException"}
_KMS = frozenset({"KMSDisabledException", "KMSNotFoundException", "KMSInvalidStateException", "KMSOptInRequired"})
_INVALID = frozenset({"ValidationException", "InvalidArgumentException", "ParamValidationError"})


@dataclass(frozen=True)
class Target:
    """Where the records go, for messages: the stream, the client's region and endpoint URL, and whether that
    URL was given (``--endpoint-url``) or is AWS's own for the region."""

    stream: str
    region: str
    endpoint_url: str
    custom_endpoint: bool

    @classmethod
    def of(cls, kinesis: Any, stream: str, endpoint_url: str | None) -> Target:
        meta = kinesis.meta
        return cls(stream, meta.region_name, endpoint_url or meta.endpoint_url, endpoint_url is not None)

    def where(self) -> str:
        return f"{self.endpoint_url} (region {self.region})"


def check_profile() -> None:
    """The profile named by ``--profile`` (which sets AWS_PROFILE) or AWS_DEFAULT_PROFILE must exist."""
    import botocore.session

    session = botocore.session.get_session()
    name = session.get_config_variable("profile")
    if name is None or name == "default" or name in session.available_profiles:
        return
    files = f"{session.get_config_variable('config_file')} or {session.get_config_variable('credentials_file')}"
    known = ", ".join(sorted(session.available_profiles)) or "none"
    raise UsageError(
        f"--profile {name}: no such profile in {files} (profiles there: {known}): create it with "
        f"`aws configure --profile {name}` or name another one",
        "--profile",
    )


def check_endpoint(endpoint_url: str | None) -> None:
    """``--endpoint-url`` must be an http(s) URL with a host."""
    if endpoint_url is None:
        return
    parsed = urlsplit(endpoint_url)
    if parsed.scheme not in {"http", "https"} or not parsed.hostname:
        raise UsageError(
            f"--endpoint-url {endpoint_url}: not an http(s) URL with a host: give one such as http://127.0.0.1:4567",
            "--endpoint-url",
        )


def resolve_region(region: str | None, endpoint_url: str | None) -> str:
    """``--region``, else the endpoint's, else the AWS config's; on AWS's endpoints it must be a Kinesis region."""
    resolved = region or infer_region(endpoint_url) or sdk_default_region()
    if not resolved:
        raise UsageError(
            "--region is not set and cannot be inferred from --endpoint-url or the AWS config (AWS_REGION, "
            "AWS_DEFAULT_REGION, the profile's region): give --region, e.g. --region us-east-1",
            "--region",
        )
    if endpoint_url is None:
        _check_known_region(resolved)
    return resolved


def _check_known_region(region: str) -> None:
    """Against botocore's partition data, in every command line's words (``pyspark_aws_kinesis.aws.regions``); a
    region newer than the installed botocore is reached with its URL."""
    newer = f"give --endpoint-url https://kinesis.{region}.amazonaws.com"
    problem = unknown_region_line(region, newer=newer)
    if problem:
        raise UsageError(problem, "--region")


def check_credentials(endpoint_url: str | None) -> None:
    """Some credentials must be found by boto3's default chain (the one ``pyspark_aws_kinesis.aws`` clients use)."""
    import botocore.session

    try:
        found = botocore.session.get_session().get_credentials()
    except BotoCoreError as exc:  # a broken credential_process, an unreadable file, ...
        message = f"--profile: the AWS credentials could not be loaded: {_one_line(str(exc))}"
        raise TargetError(message, "--profile") from None
    if found is None:
        local = "; a local server (--endpoint-url) takes any keys, e.g. testing/testing" if endpoint_url else ""
        raise TargetError(NO_CREDENTIALS + local, "--profile")


def check_stream(kinesis: Any, target: Target) -> list[Shard] | None:
    """The stream's open shards, sorted by hash key; None when listing them is denied or throttled (the run can
    still put records; only the write limit stays unknown). Raises GeneratorError for what stops any run."""
    try:
        return open_shards(list_shards(kinesis, target.stream, PREFLIGHT_RETRY))
    except Exception as exc:
        code = error_code(_root(exc))
        if code in _LISTING_DENIED or code in RETRYABLE_ERROR_CODES:
            return None
        raise explain(exc, target, "ListShards") from None


def record_limits(kinesis: Any, target: Target) -> RecordLimits:
    """The stream's largest record and call; the defaults (1 MiB records) when it cannot be described (the run can
    still put records of up to 1 MiB, which every stream takes)."""
    try:
        return describe_limits(kinesis, target.stream, PREFLIGHT_RETRY)
    except Exception as exc:
        code = error_code(_root(exc))
        if code in _LISTING_DENIED or code in RETRYABLE_ERROR_CODES:
            return DEFAULT_LIMITS
        raise explain(exc, target, "DescribeStreamSummary") from None


def is_aws_error(exc: BaseException) -> bool:
    """An error of a call to AWS (what ``explain`` explains), not of the caller's code."""
    return isinstance(exc, BotoCoreError | ClientError | RetriesExhaustedError | PutRecordsFailedError)


def explain(exc: BaseException, target: Target, action: str = "PutRecords") -> GeneratorError:
    """The one-line error for ``exc`` (raised by ``action`` on ``target``), naming the flag to change."""
    root = _root(exc)
    code = _code(exc, root)
    detail = _one_line(_detail(exc, root))
    stream = f"--stream {target.stream}"
    if code in {"ResourceNotFoundException", "StreamNotFoundError"}:
        return TargetError(
            f"{stream}: no such stream at {target.where()}: check --stream, --region and --endpoint-url "
            "(and --profile: a stream belongs to an account)",
            "--stream",
        )
    if code == "ResourceInUseException":
        return TargetError(f"{stream} is not ACTIVE at {target.where()} ({detail}): wait until it is", "--stream")
    if code in _DENIED:
        return TargetError(
            f"{stream}: access denied at {target.where()}: the credentials (--profile) need kinesis:PutRecords "
            f"and kinesis:ListShards on the stream, and kms:GenerateDataKey when it is encrypted ({detail})",
            "--profile",
        )
    if code in _KMS:
        return TargetError(f"{stream}: the stream's KMS key cannot be used: {code}: {detail}", "--stream")
    if code in _BAD_CREDENTIALS:
        return TargetError(
            f"--profile: the AWS credentials were refused at {target.where()} ({code}): check the keys "
            "(AWS_ACCESS_KEY_ID, --profile) and the clock; a local server takes any keys",
            "--profile",
        )
    if code in {"NoCredentialsError", "PartialCredentialsError"}:
        return TargetError(NO_CREDENTIALS, "--profile")
    if isinstance(root, BotocoreConnectionError | HTTPClientError):
        return _unreachable(target, code)
    if code in _INVALID:
        return UsageError(f"{stream}: {action} refused as invalid: {detail}", "--stream")
    return TargetError(f"{stream}: {action} refused at {target.where()}: {code}: {detail}", "--stream")


def _unreachable(target: Target, code: str) -> TargetError:
    if target.custom_endpoint:
        return TargetError(
            f"--endpoint-url {target.endpoint_url}: no answer ({code}): is the server running, and are the "
            "scheme, host and port right?",
            "--endpoint-url",
        )
    return TargetError(
        f"--region {target.region}: {target.endpoint_url} does not answer ({code}): check --region and the "
        "network (behind a proxy or with a VPC endpoint, give its --endpoint-url)",
        "--region",
    )


def _root(exc: BaseException) -> BaseException:
    """The AWS or connection error under the connector's wrappers (retries exhausted, PutRecords failed)."""
    while True:
        if isinstance(exc, RetriesExhaustedError):
            exc = exc.last_error
        elif isinstance(exc, PutRecordsFailedError) and isinstance(exc.__cause__, Exception):
            exc = exc.__cause__
        else:
            return exc


def _code(exc: BaseException, root: BaseException) -> str:
    if isinstance(root, PutRecordsFailedError):  # refused entry by entry: the most frequent code
        return root.error_codes.most_common(1)[0][0] if root.error_codes else "Unknown"
    if isinstance(root, StreamNotFoundError):
        return "StreamNotFoundError"
    if isinstance(root, ParamValidationError):
        return "ParamValidationError"
    return error_code(root)


def _detail(exc: BaseException, root: BaseException) -> str:
    if isinstance(root, PutRecordsFailedError):
        return root.last_message
    if isinstance(root, ClientError):
        return error_message(root)
    return str(root)


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
