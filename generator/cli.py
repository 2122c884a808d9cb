"""The command line: ``python -m kinesis_generator --stream NAME [--rate N | --periodic MEAN STDDEV] --duration S``.

Exit codes (``kinesis_generator.errors``; docs/generator.md lists them): 0 every record due was stored, 2 a flag or its
value is wrong, 3 the stream cannot be written, 4 records were lost (refused through the retry budget), 5 the
run ended before every record due was stored, 130 interrupted by Ctrl-C. A run that ends prints its summary
(stdout); an error is one line on stderr that starts with the flag at fault, and with ``--json`` also a JSON
error object on stdout.

The records' templates (faker) and the progress bar (rich) come with the package's ``[generator]`` extra: this
module imports them only when a run starts, so ``--help`` and a mistake in the flags need neither, and a run
without them ends with the one line that says what to install.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, NoReturn

from kinesis_generator.errors import (
    EXIT_INTERRUPTED,
    EXIT_LOST,
    EXIT_OK,
    EXIT_SHORT,
    GeneratorError,
    UsageError,
)
from kinesis_generator.large_records import LargeRecords
from pyspark_aws_kinesis.cli import OneLineParser, endpoint_url, number, program
from pyspark_aws_kinesis.retry import RetryPolicy
from pyspark_aws_kinesis.sink.entries import LARGEST_RECORD_BYTES

if TYPE_CHECKING:
    from kinesis_generator.stats import Summary

# argparse's messages, as OneLineParser words them: "--rate: got '-5'; ...", "... are required: --stream"
_FLAG_IN_MESSAGE = re.compile(r"(--[a-z-]+)")
SCRIPT = "kinesis-generator"  # pyproject.toml's [project.scripts]
EXTRA = "generator"  # pyproject.toml's [project.optional-dependencies]: faker (templates) and rich (progress bar)
EXTRA_MODULES = frozenset({"faker", "rich"})
DISTRIBUTION = "pyspark-aws-kinesis"
# Bounds that keep every count of the run a finite number (a year of a million records a second).
MAX_RATE = 1_000_000
MAX_DURATION_S = 365 * 24 * 3600
DEFAULT_MAX_RETRIES = 5  # kinesis_generator.sender.DEFAULT_RETRY's (a test keeps them equal)


class _Parser(OneLineParser):
    """The shared one-line parser, raising ``UsageError`` (one line, exit 2, JSON with ``--json``) instead."""

    def error(self, message: str) -> NoReturn:
        flag = _FLAG_IN_MESSAGE.search(message)
        raise UsageError(self.usage_line(message), flag and flag.group(1))


class Interrupted(GeneratorError):
    """Ctrl-C before the run started."""

    exit_code = EXIT_INTERRUPTED


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=program("kinesis_generator", SCRIPT),
        description="Send records rendered from a KDG-style template into a Kinesis stream.",
        epilog="Exit codes: 0 done, 2 bad flag or value, 3 stream cannot be written, 4 records lost, "
        "5 not every record sent in time, 130 Ctrl-C (docs/generator.md).",
    )
    target = parser.add_argument_group("target")
    target.add_argument("--stream", required=True, help="Kinesis stream name, or ARN (a stream another account shares)")
    target.add_argument("--region", help="AWS region (default: from --endpoint-url or the AWS config)")
    target.add_argument("--endpoint-url", type=endpoint_url, help="e.g. http://127.0.0.1:4567 for a local server")
    target.add_argument("--profile", help="AWS profile of the shared config/credentials files")
    content = parser.add_argument_group("records")
    source = content.add_mutually_exclusive_group()
    source.add_argument("--template", help="template text (default: generator/templates/seed.json)")
    source.add_argument("--template-file", type=Path, help="file holding the template")
    content.add_argument(
        "--partition-key",
        help="partition key template (default: 16 random letters and digits, {{random.alphaNumeric(16)}})",
    )
    content.add_argument(
        "--seed",
        type=number(0, inclusive=True, whole=True),
        help="seed the random helpers and Faker for reproducible records",
    )
    content.add_argument(
        "--large-share",
        type=number(0, maximum=100, unit="percent"),
        metavar="PERCENT",
        help="this share of the records, evenly spread, padded with spaces to --large-size bytes (e.g. 2)",
    )
    content.add_argument(
        "--large-size",
        type=number(1, inclusive=True, maximum=LARGEST_RECORD_BYTES, whole=True, unit="bytes"),
        metavar="BYTES",
        help="size of the --large-share records, data + partition key (at most the stream's maximum record size)",
    )
    pace = parser.add_argument_group("rate and length (one of --duration / --count is required)")
    mode = pace.add_mutually_exclusive_group()
    per_second = number(0, maximum=MAX_RATE, unit="records per second")
    mode.add_argument("--rate", type=per_second, default=100.0, help="records per second (default: 100)")
    mode.add_argument(
        "--periodic",
        nargs=2,
        type=number(0, inclusive=True, maximum=MAX_RATE, unit="records per second"),
        metavar=("MEAN", "STDDEV"),
        help="KDG periodic mode: each second, a burst of Normal(MEAN, STDDEV) records (MEAN > 0)",
    )
    pace.add_argument(
        "--duration",
        type=number(0, maximum=MAX_DURATION_S, unit="seconds"),
        help="seconds to run, on the wall clock, retries included",
    )
    pace.add_argument("--count", type=number(0, whole=True, unit="records"), help="records to send")
    sending = parser.add_argument_group("sending")
    sending.add_argument(
        "--workers", type=number(0, whole=True), default=1, help="concurrent PutRecords senders (default 1)"
    )
    sending.add_argument("--aggregate", action="store_true", help="KPL-aggregate records per shard")
    sending.add_argument(
        "--max-retries",
        type=number(0, inclusive=True, whole=True),
        default=DEFAULT_MAX_RETRIES,
        help=f"retry rounds of failed entries (default: {DEFAULT_MAX_RETRIES})",
    )
    output = parser.add_argument_group("output")
    output.add_argument("--quiet", action="store_true", help="no progress bar")
    output.add_argument("--json", action="store_true", help="print the summary (or the error) as JSON on stdout")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    as_json = _wants_json(argv)
    try:
        summary = _run(build_parser().parse_args(argv))
    except GeneratorError as exc:
        return _fail(exc, as_json)
    except KeyboardInterrupt:  # Ctrl-C during the checks, before the first record (later, run() handles it)
        return _fail(Interrupted("interrupted before the first record was sent"), as_json)
    _print(summary, as_json)
    return exit_code(summary)


def exit_code(summary: Summary) -> int:
    """130 interrupted, 4 records lost, 5 records not stored in time, else 0."""
    if summary.interrupted:
        return EXIT_INTERRUPTED
    if summary.failed:
        return EXIT_LOST
    return EXIT_OK if summary.complete else EXIT_SHORT


def _run(args: argparse.Namespace) -> Summary:
    """Check what the flags alone can tell, then ``kinesis_generator.run``; bad input becomes a ``UsageError``."""
    if args.duration is None and args.count is None:
        raise UsageError("give --duration SECONDS or --count RECORDS (or both) so the run has an end", "--duration")
    if (args.large_share is None) != (args.large_size is None):
        given, missing = (
            ("--large-share", "--large-size") if args.large_size is None else ("--large-size", "--large-share")
        )
        raise UsageError(f"{given} needs {missing}: give both, or neither", missing)
    sender = _sender()
    from kinesis_generator.template import TemplateError  # after _sender(): it needs faker too

    if args.profile:
        os.environ["AWS_PROFILE"] = args.profile  # read by boto3's default chain inside pyspark_aws_kinesis.aws
    flag = f"--template-file {args.template_file}" if args.template_file else "--template"
    retry = sender.DEFAULT_RETRY
    try:
        return sender.run(
            stream_name=args.stream,
            template=_read(args.template_file) if args.template_file else args.template,
            rate=args.rate,
            periodic=tuple(args.periodic) if args.periodic else None,
            duration_s=args.duration,
            count=args.count,
            partition_key=args.partition_key,
            endpoint_url=args.endpoint_url,
            region=args.region,
            workers=args.workers,
            aggregate=args.aggregate,
            retry=RetryPolicy(args.max_retries, retry.initial_interval_ms, retry.max_interval_ms),
            seed=args.seed,
            quiet=args.quiet,
            large=LargeRecords(args.large_share / 100, args.large_size) if args.large_size else None,
        )
    except TemplateError as exc:
        raise UsageError(f"{flag}: {exc}", flag.split()[0]) from None


def _sender() -> ModuleType:
    """``kinesis_generator.sender``, or the one line that says which extra brings what it needs (faker, rich)."""
    try:
        from kinesis_generator import sender
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").split(".")[0]
        if missing not in EXTRA_MODULES:
            raise
        raise UsageError(
            f"{missing} is not installed: the load generator needs the package's [{EXTRA}] extra: "
            f"pip install '.[{EXTRA}]' in this checkout, or pip install '{DISTRIBUTION}[{EXTRA}]'"
        ) from None
    return sender


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(
            f"--template-file {path}: cannot read it ({reason}): give the path of a template file",
            "--template-file",
        ) from None


def _wants_json(argv: list[str]) -> bool:
    """Whether ``--json`` was asked, known even when the rest of the command line does not parse."""
    probe = _Parser(add_help=False)
    probe.add_argument("--json", action="store_true")
    try:
        return probe.parse_known_args(argv)[0].json
    except UsageError:  # e.g. --json=yes: the real parser reports it
        return False


def _fail(error: GeneratorError, as_json: bool) -> int:
    first, *rest = str(error).splitlines() or [""]
    print(f"error: {first}", file=sys.stderr)
    for line in rest:  # a template error lists the known helpers under its one line
        print(line, file=sys.stderr)
    if as_json:
        print(json.dumps(error.as_dict()))
    elif error.summary is not None:
        print("\n".join(error.summary.lines()))
    return error.exit_code


def _print(summary: Summary, as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary.as_dict()))
    else:
        print("\n".join(summary.lines()))
