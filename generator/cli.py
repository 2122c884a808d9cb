"""The command line: ``python -m generator --stream NAME [--rate N | --periodic MEAN STDDEV] --duration S``.

Exit codes: 0 done, 1 bad input or a refused stream (message on stderr, nothing sent for bad input),
130 interrupted by Ctrl-C (the summary is still printed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from connector.retry import RetryPolicy
from connector.sink.put_records import PutRecordsFailedError
from generator.sender import DEFAULT_PARTITION_KEY, DEFAULT_RETRY, run
from generator.stats import Summary
from generator.template import TemplateError

EXIT_INTERRUPTED = 130


def _positive(kind: type) -> object:
    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {kind.__name__}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m generator",
        description="Send records rendered from a KDG-style template into a Kinesis stream.",
    )
    target = parser.add_argument_group("target")
    target.add_argument("--stream", required=True, help="Kinesis stream name")
    target.add_argument("--region", help="AWS region (default: from --endpoint-url or the AWS config)")
    target.add_argument("--endpoint-url", help="e.g. http://127.0.0.1:4567 for a local server")
    target.add_argument("--profile", help="AWS profile of the shared config/credentials files")
    content = parser.add_argument_group("records")
    source = content.add_mutually_exclusive_group()
    source.add_argument("--template", help="template text (default: generator/templates/seed.json)")
    source.add_argument("--template-file", type=Path, help="file holding the template")
    content.add_argument(
        "--partition-key",
        default=DEFAULT_PARTITION_KEY,
        help=f"partition key template (default: {DEFAULT_PARTITION_KEY})",
    )
    content.add_argument("--seed", type=int, help="seed the random helpers and Faker for reproducible records")
    pace = parser.add_argument_group("rate and length (one of --duration / --count is required)")
    mode = pace.add_mutually_exclusive_group()
    mode.add_argument("--rate", type=_positive(float), default=100.0, help="records per second (default: 100)")
    mode.add_argument(
        "--periodic",
        nargs=2,
        type=float,
        metavar=("MEAN", "STDDEV"),
        help="KDG periodic mode: each second, a burst of Normal(MEAN, STDDEV) records",
    )
    pace.add_argument("--duration", type=_positive(float), help="seconds to run")
    pace.add_argument("--count", type=_positive(int), help="records to send")
    sending = parser.add_argument_group("sending")
    sending.add_argument("--workers", type=_positive(int), default=1, help="concurrent PutRecords senders (default 1)")
    sending.add_argument("--aggregate", action="store_true", help="KPL-aggregate records per shard")
    sending.add_argument(
        "--max-retries", type=int, default=DEFAULT_RETRY.max_retries, help="retry rounds of failed entries"
    )
    output = parser.add_argument_group("output")
    output.add_argument("--quiet", action="store_true", help="no progress bar")
    output.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.duration is None and args.count is None:
        parser.error("give --duration SECONDS or --count RECORDS (or both) so the run has an end")
    if args.profile:
        os.environ["AWS_PROFILE"] = args.profile  # read by boto3's default chain inside connector.aws
    template = args.template_file.read_text() if args.template_file else args.template
    try:
        summary = run(
            stream_name=args.stream,
            template=template,
            rate=args.rate,
            periodic=tuple(args.periodic) if args.periodic else None,
            duration_s=args.duration,
            count=args.count,
            partition_key=args.partition_key,
            endpoint_url=args.endpoint_url,
            region=args.region,
            workers=args.workers,
            aggregate=args.aggregate,
            retry=RetryPolicy(args.max_retries, DEFAULT_RETRY.initial_interval_ms, DEFAULT_RETRY.max_interval_ms),
            seed=args.seed,
            quiet=args.quiet,
        )
    except (TemplateError, ValueError, PutRecordsFailedError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    _print(summary, args.json)
    return EXIT_INTERRUPTED if summary.interrupted else 0


def _print(summary: Summary, as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary.as_dict()))
    else:
        print("\n".join(summary.lines()))
