"""``python -m localaws`` (``make servers``): local servers for a person's own experiments, kept up until Ctrl-C,
SIGTERM or SIGHUP. It starts kinesalite or kinesis-mock (behind AWS's Kinesis quotas unless ``--no-quotas``) and moto
through ``LocalAws``, creates the ``--stream``s, prints the endpoints and the ``export`` lines for boto3, the AWS
CLI, the generator and the connector, and at the stop ends every server's process group and removes its temporary
log directory (exit 0; a mistake or a failed start: one line, exit 2; a server that died: exit 1). Who calls it:
people (docs/localaws.md, CONTRIBUTING.md) and tests/localaws/test_main.py.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import NoReturn

from localaws.local_aws import LocalAws
from localaws.servers import DEFAULT_REGION, DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY, KINESALITE, KINESIS_MOCK, MOTO
from localaws.streams import create_stream
from pyspark_aws_kinesis.cli import EXIT_USAGE, OneLineParser

PROG = "python -m localaws"
EXIT_SERVER_DIED = 1
KINESIS_SERVERS = {spec.name: spec for spec in (KINESALITE, KINESIS_MOCK)}
STREAM = re.compile(r"^([A-Za-z0-9_.-]{1,128})(?::([1-9][0-9]{0,2}))?$")
READY_LINE = "Ctrl-C (or SIGTERM) stops them"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # SIGHUP: the terminal closed


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = OneLineParser(
        prog=PROG,
        description="Local AWS servers for your own experiments, until Ctrl-C: a Kinesis server (behind AWS's Kinesis "
        "quotas unless --no-quotas) and moto; prints the endpoints and what to export (docs/localaws.md).",
    )
    parser.add_argument(
        "--kinesis",
        choices=sorted(KINESIS_SERVERS),
        default=KINESALITE.name,
        help="the Kinesis server (default: kinesalite, fast; kinesis-mock also has enhanced fan-out)",
    )
    parser.add_argument("--no-quotas", action="store_true", help="no quota proxy: the Kinesis server itself")
    parser.add_argument("--no-moto", action="store_true", help="no moto (S3, DynamoDB, STS, CloudWatch, ...)")
    parser.add_argument(
        "--stream",
        action="append",
        default=[],
        metavar="NAME[:SHARDS]",
        help="create this stream (1 shard unless :SHARDS, at most 999); repeatable",
    )
    parser.add_argument(
        "--log-dir", type=Path, help="the servers' logs, kept after the stop (default: a temporary directory, removed)"
    )
    args = parser.parse_args(argv)
    for stream in args.stream:
        if not STREAM.match(stream):
            parser.error(f"--stream {stream!r}: a stream name (letters, digits, _ . -), optionally :SHARDS (1-999)")
    return args


def environment(kinesis_url: str, moto_url: str | None) -> dict[str, str]:
    """What to export so that AWS SDKs with no endpoint of their own reach the local servers: Kinesis through
    ``AWS_ENDPOINT_URL_KINESIS``, every other service through ``AWS_ENDPOINT_URL`` (moto), dummy keys, and the
    region (botocore reads ``AWS_DEFAULT_REGION``; other SDKs ``AWS_REGION``)."""
    env = {"AWS_ENDPOINT_URL_KINESIS": kinesis_url}
    if moto_url:
        env["AWS_ENDPOINT_URL"] = moto_url
    return env | {
        "AWS_ACCESS_KEY_ID": DUMMY_ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": DUMMY_SECRET_KEY,
        "AWS_DEFAULT_REGION": DEFAULT_REGION,
        "AWS_REGION": DEFAULT_REGION,
    }


def describe(aws: LocalAws, args: argparse.Namespace, streams: list[str]) -> str:
    kinesis = aws[args.kinesis]
    moto_url = None if args.no_moto else aws.moto.endpoint_url
    lines = [f"{args.kinesis:<13} {kinesis.endpoint_url}"]
    if kinesis.quota_proxy is not None:
        lines[0] += f"  behind AWS's Kinesis quotas (the server itself: {kinesis.direct.endpoint_url})"
    if moto_url:
        lines.append(f"{'moto':<13} {moto_url}  S3, DynamoDB, STS, CloudWatch and the other services")
    if streams:
        lines.append(f"{'streams':<13} {', '.join(streams)}")
    kept = "kept" if args.log_dir else f"removed at the stop; {PROG} --log-dir DIR keeps them"
    lines.append(f"{'logs':<13} {aws.log_dir} ({kept})")
    lines += ["", "# boto3, the AWS CLI, the generator and the connector (without endpoint options) read these:"]
    lines += [f"export {name}={value}" for name, value in environment(kinesis.endpoint_url, moto_url).items()]
    lines += [
        "",
        f'# or per job: .option("kinesis.endpointUrl", "{kinesis.endpoint_url}"); the generator: --endpoint-url '
        f"{kinesis.endpoint_url}",
        f"{READY_LINE}.",
    ]
    return "\n".join(lines)


def _stop_on(signum: int, frame: object) -> NoReturn:
    raise KeyboardInterrupt


def _create_streams(aws: LocalAws, kinesis_name: str, streams: list[str]) -> list[str]:
    client = aws[kinesis_name].direct.client("kinesis")  # setup spends no quota
    created = []
    for stream in streams:
        name, shards = STREAM.match(stream).groups()  # type: ignore[union-attr]  (checked by parse_args)
        create_stream(client, name, int(shards or 1))
        created.append(f"{name} ({shards or 1} shard{'s' if int(shards or 1) > 1 else ''})")
    return created


def _wait_until_one_dies(aws: LocalAws) -> str:
    while True:
        for server in aws.servers.values():
            if server.exit_code() is not None:
                return f"{server.name} (pid {server.pid}) exited with code {server.exit_code()}; log {server.log_path}"
        time.sleep(0.5)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    specs = [KINESIS_SERVERS[args.kinesis], *([] if args.no_moto else [MOTO])]
    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="localaws-"))
    aws = LocalAws(specs, log_dir=log_dir, quotas=not args.no_quotas)
    # The same clean stop for each; SIGINT too, which a shell's background job starts with ignored.
    for signum in STOP_SIGNALS:
        signal.signal(signum, _stop_on)
    code, keep_logs = 0, bool(args.log_dir)
    try:
        try:
            aws.start()
            streams = _create_streams(aws, args.kinesis, args.stream)
        except Exception as exc:  # a server that does not start, no node_modules, a stream refused (ClientError)
            kept = f" (logs kept in {log_dir})" if log_dir.is_dir() and any(log_dir.iterdir()) else ""
            print(f"error: {_first_line(exc)}{kept}", file=sys.stderr)
            code, keep_logs = EXIT_USAGE, True
            return code
        print(describe(aws, args, streams), flush=True)
        print(f"error: {_wait_until_one_dies(aws)}", file=sys.stderr)
        code, keep_logs = EXIT_SERVER_DIED, True
    except KeyboardInterrupt:
        pass  # the stop asked for: code 0
    finally:
        for signum in STOP_SIGNALS:  # a second Ctrl-C must not cut the stop short
            signal.signal(signum, signal.SIG_IGN)
        summary = aws.quota_summary() if aws.fronts else ""
        aws.stop()
        print(f"stopped; what the quota proxy counted:\n{summary}" if summary else "stopped", flush=True)
        if not keep_logs:
            with contextlib.suppress(OSError):
                shutil.rmtree(log_dir)
    return code


def _first_line(exc: Exception) -> str:
    """An error's first line (a server's start failure goes on with its log's tail: the logs are kept)."""
    text = str(exc).strip()
    return " ".join(text.splitlines()[0].split()) if text else type(exc).__name__


if __name__ == "__main__":
    sys.exit(main())
