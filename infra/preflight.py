"""Checks the submitters run before they upload or start anything, each failing with one line that names the
flag or value and what to do, and the exit code the submitters document.

`infra.submit_step` (an EMR cluster step) and `infra.submit_serverless` (an EMR Serverless job run) call
`open_session`, `check_credentials`, `check_bucket` and their own target check, in that order, and wrap their
AWS calls in `aws_errors` so that a botocore error that reaches the user is one line too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import boto3
import botocore.exceptions
from botocore.exceptions import ClientError

from pyspark_aws_kinesis.aws.regions import unknown_region_line

EXIT_OK = 0  # the step or job run completed (or was submitted, without waiting)
EXIT_FAILED = 1  # it failed or was cancelled, or its cluster or application is gone
EXIT_USAGE = 2  # a flag's value is wrong: unknown region, no such bucket, cluster or application, bad job name
EXIT_TIMEOUT = 3  # still pending or running when the wait's time ran out
EXIT_AWS = 4  # AWS cannot be used: no credentials, expired or refused credentials, access denied, unreachable

# AWS error codes that mean "these credentials are not good", whatever the service.
_BAD_CREDENTIALS = {
    "InvalidClientTokenId",
    "UnrecognizedClientException",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "ExpiredTokenException",
    "InvalidAccessKeyId",
    "InvalidToken",
    "AuthFailure",
}
_ACCESS_DENIED = {"AccessDenied", "AccessDeniedException", "403", "Forbidden"}
_CREDENTIALS_HINT = "set AWS_PROFILE (or --profile) or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or run `aws configure`"
CLUSTER_ID_RE = re.compile(r"^j-[0-9A-Z]{1,64}$")


class PreflightError(Exception):
    """A user's mistake or an unusable AWS setup, with the one line to print and the exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE):
        super().__init__(message)
        self.exit_code = exit_code


def open_session(region: str, profile: str | None, *, service: str, allow_unknown_region: bool) -> boto3.Session:
    """A boto3 session for `--profile` in `--region`, refusing a profile that does not exist and a region that
    botocore does not know for `service` (unless `--allow-unknown-region`: a region newer than this botocore)."""
    try:
        session = boto3.session.Session(region_name=region, profile_name=profile)
    except botocore.exceptions.ProfileNotFound:
        raise PreflightError(
            f"--profile {profile!r}: no such profile in the AWS config files; `aws configure list-profiles` lists "
            "them (or leave --profile out to use the default credentials)"
        ) from None
    problem = None if allow_unknown_region else unknown_region_line(region, service=service)
    if problem:  # worded as by every command line of the project (pyspark_aws_kinesis.aws.regions)
        raise PreflightError(problem)
    return session


def check_credentials(session: boto3.session.Session) -> None:
    """Fail early, before any call, when no credentials can be found at all."""
    try:
        credentials = session.get_credentials()
    except botocore.exceptions.BotoCoreError as error:  # e.g. a profile whose source or process fails
        raise PreflightError(f"AWS credentials could not be loaded ({error}); {_CREDENTIALS_HINT}", EXIT_AWS) from None
    if credentials is None:
        raise PreflightError(f"no AWS credentials found: {_CREDENTIALS_HINT}", EXIT_AWS)


def check_bucket(s3, bucket: str, region: str) -> None:
    """The bucket exists, we may use it, and it is in `region` (code and logs must stay beside the job)."""
    with aws_errors(f"--bucket {bucket!r}"):
        try:
            answer = s3.head_bucket(Bucket=bucket)
        except ClientError as error:
            status = str(error.response.get("Error", {}).get("Code", ""))
            if status in ("404", "NoSuchBucket"):
                raise PreflightError(
                    f"--bucket {bucket!r}: no such bucket; use the stack output BucketName of the Storage stack"
                ) from None
            if status == "301":
                where = error.response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("x-amz-bucket-region")
                raise PreflightError(
                    f"--bucket {bucket!r} is in region {where or 'another region'}, not --region {region!r}: use "
                    "the bucket of the stacks in that region"
                ) from None
            raise
    where = answer.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("x-amz-bucket-region")
    if where and where != region:
        raise PreflightError(
            f"--bucket {bucket!r} is in region {where}, not --region {region!r}: use the bucket of the stacks in "
            "that region"
        )


@contextmanager
def aws_errors(subject: str) -> Iterator[None]:
    """Turn botocore's errors inside into one-line PreflightErrors about `subject` (a flag and its value)."""
    try:
        yield
    except ClientError as error:
        code = str(error.response.get("Error", {}).get("Code", ""))
        message = error.response.get("Error", {}).get("Message") or code
        if code in _BAD_CREDENTIALS:
            refused = f"AWS refused the credentials ({code}: {message}); {_CREDENTIALS_HINT}"
            raise PreflightError(refused, EXIT_AWS) from None
        if code in _ACCESS_DENIED:
            raise PreflightError(
                f"{subject}: access denied ({message}); the caller needs the permissions docs/infra.md lists",
                EXIT_AWS,
            ) from None
        raise PreflightError(f"{subject}: {code}: {message}", EXIT_AWS) from None
    except botocore.exceptions.NoCredentialsError:
        raise PreflightError(f"no AWS credentials found: {_CREDENTIALS_HINT}", EXIT_AWS) from None
    except (botocore.exceptions.EndpointConnectionError, botocore.exceptions.ConnectTimeoutError) as error:
        raise PreflightError(
            f"{subject}: AWS could not be reached ({error}); check --region, --endpoint-url and the network", EXIT_AWS
        ) from None
    except botocore.exceptions.BotoCoreError as error:
        raise PreflightError(f"{subject}: {error}", EXIT_AWS) from None
