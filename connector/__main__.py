"""``python -m pyspark_aws_kinesis consumers list|register|deregister --stream S [--name N] [--region R]
[--endpoint-url U]``

Manages a stream's enhanced fan-out consumers by hand, e.g. to remove one a crashed query left registered
(consumers cost money while registered). Credentials come from the AWS SDK's default chain, through
``pyspark_aws_kinesis.aws``. A mistake is one line on stderr that names the flag or value and what to do; the region is
checked (botocore's partition data) before any call. Exit codes: 0 done, 1 AWS error or timeout, 2 a flag or its
value is wrong (usage, unknown --region, no such --stream or AWS_PROFILE), 3 no such consumer (deregister),
4 AWS cannot be used (no or refused credentials, access denied, endpoint unreachable).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, ProfileNotFound
from botocore.exceptions import ConnectionError as BotocoreConnectionError

from . import options as opts
from .aws.clients import kinesis_client
from .aws.regions import unknown_region_line
from .aws.settings import ClientSettings, infer_region, sdk_default_region
from .cli import OneLineParser, endpoint_url, number
from .consumers import (
    ConsumerError,
    WaitPolicy,
    deregister_consumer,
    ensure_consumer,
    list_consumers,
    stream_arn,
)
from .options import OptionError
from .retry import RetriesExhaustedError, error_code, error_message

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_AWS = 0, 1, 2, 3, 4
CREDENTIALS_HINT = "set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or run `aws configure`"
# AWS error codes that mean "these credentials are not good".
_BAD_CREDENTIALS = frozenset(
    {"UnrecognizedClientException", "InvalidClientTokenId", "InvalidSignatureException", "ExpiredTokenException"}
)
_ACCESS_DENIED = frozenset({"AccessDeniedException", "AccessDenied"})


class CliError(Exception):
    """A mistake or an unusable AWS setup: the one line to print and the exit code."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(" ".join(message.split()))  # one line, whatever AWS's text holds
        self.exit_code = exit_code


PROG = "python -m pyspark_aws_kinesis"
COMMANDS = {"consumers": "list, register or deregister enhanced fan-out consumers"}


def _parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The command's parser, and each sub-command's (whose errors point at ``<command> --help``)."""
    parser = OneLineParser(prog=PROG, description=__doc__.split("\n\n")[1])
    # Not required=True: argparse would name the missing command by its dest; main() says which commands exist.
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    consumers = commands.add_parser("consumers", help=COMMANDS["consumers"])
    consumers.add_argument("action", metavar="ACTION", choices=("list", "register", "deregister"), help="%(choices)s")
    consumers.add_argument("--stream", required=True, help="the stream's name")
    consumers.add_argument("--name", help="the consumer's name (required to register or deregister)")
    consumers.add_argument("--region", help="AWS region (default: inferred from the endpoint or the SDK)")
    consumers.add_argument(
        "--endpoint-url", type=endpoint_url, help="Kinesis endpoint (default: the region's AWS endpoint)"
    )
    consumers.add_argument(
        "--allow-unknown-region", action="store_true", help="accept a --region that this botocore does not list yet"
    )
    consumers.add_argument(
        "--timeout",
        type=number(0, unit="seconds"),
        default=300.0,
        help="seconds to wait for ACTIVE or gone (default: %(default)g)",
    )
    return parser, {"consumers": consumers}


def main(argv: Sequence[str] | None = None) -> int:
    parser, commands = _parsers()
    args, unknown = parser.parse_known_args(argv)
    if args.command is None:
        known = "; ".join(f"{name} ({what})" for name, what in COMMANDS.items())
        parser.error(f"no command given; the commands are: {known}; e.g. {PROG} consumers list --stream NAME")
    command = commands[args.command]
    if unknown:
        command.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.action != "list" and not args.name:
        command.error(f"--name: missing; consumers {args.action} needs the consumer's name")
    try:
        settings = _settings(args)
        try:
            return _run(args, kinesis_client(settings), settings.retry, WaitPolicy(timeout_s=args.timeout))
        except (ConsumerError, RetriesExhaustedError, ClientError, BotoCoreError) as exc:
            raise explain(exc, args, settings) from None
    except CliError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code


def _settings(args: argparse.Namespace) -> ClientSettings:
    """The client settings of the flags, after the checks that need no call: a region AWS has, a region at all."""
    raw = {
        opts.REGION.name: args.region,
        opts.ENDPOINT_URL.name: args.endpoint_url,
        opts.ALLOW_UNKNOWN_REGION.name: "true",  # checked below, in the flags' words
    }
    try:
        if not (args.region or infer_region(args.endpoint_url) or sdk_default_region()):
            inferred = f"; none can be inferred from --endpoint-url {args.endpoint_url}" if args.endpoint_url else ""
            raise CliError(
                f"--region: missing{inferred}; pass --region (e.g. us-east-1) or set AWS_DEFAULT_REGION", EXIT_USAGE
            )
        settings = ClientSettings.from_raw({key: value for key, value in raw.items() if value})
        source = "--region" if args.region else "AWS_DEFAULT_REGION (or the AWS config's region)"
        region = settings.region_of("kinesis")
        problem = None if args.allow_unknown_region else unknown_region_line(region, flag=source)
    except OptionError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    except ProfileNotFound as exc:  # botocore reads AWS_PROFILE's profile for the default region and its endpoints
        raise _no_profile(exc) from None
    if problem:
        raise CliError(problem, EXIT_USAGE)
    return settings


def _no_profile(exc: ProfileNotFound) -> CliError:
    """AWS_PROFILE names a profile the AWS config files do not have."""
    profile = exc.kwargs.get("profile")
    return CliError(
        f"AWS_PROFILE {profile!r}: no such profile in the AWS config files; `aws configure list-profiles` lists them "
        "(or unset AWS_PROFILE to use the default credentials)",
        EXIT_USAGE,
    )


def explain(exc: BaseException, args: argparse.Namespace, settings: ClientSettings) -> CliError:
    """The one line and exit code for an error of a call: who caused it (a flag, the credentials, the network)."""
    where = (
        f"--endpoint-url {args.endpoint_url}" if args.endpoint_url else f"Kinesis in {settings.region_of('kinesis')}"
    )
    last = exc.last_error if isinstance(exc, RetriesExhaustedError) else exc
    if isinstance(last, ProfileNotFound):
        return _no_profile(last)
    if isinstance(last, NoCredentialsError):
        return CliError(f"no AWS credentials found: {CREDENTIALS_HINT}", EXIT_AWS)
    if isinstance(last, BotocoreConnectionError):
        return CliError(
            f"{where} could not be reached ({last}); check --endpoint-url, --region and the network", EXIT_AWS
        )
    code = error_code(last)
    if code == "ResourceNotFoundException":
        return CliError(
            f"--stream {args.stream!r}: no such stream at {where} ({error_message(last)}); "
            "`aws kinesis list-streams` lists them",
            EXIT_USAGE,
        )
    if code in _BAD_CREDENTIALS:
        return CliError(f"AWS refused the credentials ({code}: {error_message(last)}); {CREDENTIALS_HINT}", EXIT_AWS)
    if code in _ACCESS_DENIED:
        return CliError(
            f"access denied ({error_message(last)}): the caller needs kinesis:DescribeStreamSummary, "
            "ListStreamConsumers, DescribeStreamConsumer, RegisterStreamConsumer and DeregisterStreamConsumer",
            EXIT_AWS,
        )
    return CliError(str(exc), EXIT_FAILED)


def _run(args: argparse.Namespace, kinesis, retry, wait: WaitPolicy) -> int:
    if args.action == "list":
        consumers = list_consumers(kinesis, stream_arn(kinesis, args.stream, retry), retry)
        if not consumers:
            print(f"stream '{args.stream}' has no enhanced fan-out consumers")
        for consumer in consumers:
            created = consumer.created.isoformat() if consumer.created else "-"
            print(f"{consumer.name}\t{consumer.status}\t{created}\t{consumer.arn}")
        return EXIT_OK
    if args.action == "register":
        consumer = ensure_consumer(kinesis, args.stream, args.name, retry, wait)
        print(f"{consumer.name}\t{consumer.status}\t{consumer.arn}")
        return EXIT_OK
    if deregister_consumer(kinesis, args.stream, args.name, retry, wait):
        print(f"deregistered consumer '{args.name}' of stream '{args.stream}'")
        return EXIT_OK
    print(f"error: stream '{args.stream}' has no consumer named '{args.name}'", file=sys.stderr)
    return EXIT_NOT_FOUND


if __name__ == "__main__":
    sys.exit(main())
