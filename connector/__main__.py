"""``python -m connector consumers list|register|deregister --stream S [--name N] [--region R] [--endpoint-url U]``

Manages a stream's enhanced fan-out consumers by hand, e.g. to remove one a crashed query left registered
(consumers cost money while registered). Credentials come from the AWS SDK's default chain, through
``connector.aws``. Exit codes: 0 done, 1 AWS error or timeout, 2 bad arguments, 3 no such consumer (deregister).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from botocore.exceptions import BotoCoreError, ClientError

from . import options as opts
from .aws.clients import kinesis_client
from .aws.settings import ClientSettings
from .consumers import (
    ConsumerError,
    WaitPolicy,
    deregister_consumer,
    ensure_consumer,
    list_consumers,
    stream_arn,
)
from .options import OptionError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_FOUND = 0, 1, 2, 3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m connector", description=__doc__.split("\n\n")[1])
    commands = parser.add_subparsers(dest="group", required=True)
    consumers = commands.add_parser("consumers", help="list, register or deregister enhanced fan-out consumers")
    consumers.add_argument("action", choices=("list", "register", "deregister"))
    consumers.add_argument("--stream", required=True, help="the stream's name")
    consumers.add_argument("--name", help="the consumer's name (required to register or deregister)")
    consumers.add_argument("--region", help="AWS region (default: inferred from the endpoint or the SDK)")
    consumers.add_argument("--endpoint-url", help="Kinesis endpoint (default: the region's AWS endpoint)")
    consumers.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for ACTIVE or gone")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.action != "list" and not args.name:
        parser.error(f"consumers {args.action} needs --name")
    raw = {opts.REGION.name: args.region, opts.ENDPOINT_URL.name: args.endpoint_url}
    try:
        settings = ClientSettings.from_raw({key: value for key, value in raw.items() if value})
        return _run(args, kinesis_client(settings), settings.retry, WaitPolicy(timeout_s=args.timeout))
    except (OptionError, ConsumerError, ClientError, BotoCoreError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED


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
