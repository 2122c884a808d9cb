"""Start a sample job as a streaming job run on the pipeline's EMR Serverless application, wait with progress,
and stop it (`python -m infra.submit_step --serverless ...` runs this module).

    python -m infra.submit_step --serverless --application-id <ApplicationId> \\
        --job-role-arn <ServerlessJobRoleArn> --venv-uri <VenvArchiveUri> --bucket <BucketName> \\
        --source-stream kinesis-spark-source --sink-stream kinesis-spark-sink --region eu-west-1 \\
        [--profile dev] [--job country_counts] [--run-seconds N] [--timeout-seconds 3600] [--no-wait] \\
        [-- extra job arguments]
    python -m infra.submit_step --serverless --application-id <id> --region eu-west-1 --stop <job run id>

It checks what it can first (`infra.preflight`: job, region, profile, credentials, bucket, and the application:
exists, not terminated), then uploads the jobs' zip and entry file like `infra.submit_step`, and starts a job run
with `mode=STREAMING` (EMR Serverless restarts a failed streaming run, up to `--max-failed-attempts-per-hour`),
the packed environment as Python (`infra.packaging.serverless_job_driver`) and the same job arguments as the
cluster's step (checkpoint and stop marker in the bucket). It prints each state change until the run ends.
With `--run-seconds N` it stops the run (CancelJobRun, with a grace period for the current batch) N seconds
after it started RUNNING, and waits until it is CANCELLED; `--stop <id>` stops a run started earlier.

Exit codes: 0 the run succeeded, was stopped as asked, or was started (--no-wait); 1 it failed or was cancelled
by someone else; 2 a flag's value is wrong; 3 timed out while it still ran (it keeps running: stop it with
`--stop`); 4 AWS cannot be used. Every error is one line on stderr.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from infra import packaging, preflight
from infra.job_code import check_job, job_names, upload_code
from infra.preflight import EXIT_FAILED, EXIT_OK, EXIT_TIMEOUT, PreflightError
from pyspark_aws_kinesis.cli import OneLineParser, endpoint_url, number

SUCCESS_STATES = {"SUCCESS"}
FAILED_STATES = {"FAILED", "CANCELLED"}
APPLICATION_GONE_STATES = {"TERMINATED"}
# Time for the running batch to finish and commit before the job run is stopped.
SHUTDOWN_GRACE_SECONDS = 120


class JobRunFailedError(RuntimeError):
    """The job run ended FAILED, or CANCELLED when we did not ask for it."""


def check_application(client, application_id: str, region: str) -> str:
    """The application exists in `region` and can take job runs; returns its state."""
    with preflight.aws_errors(f"--application-id {application_id!r}"):
        try:
            application = client.get_application(applicationId=application_id)["application"]
        except (client.exceptions.ResourceNotFoundException, client.exceptions.ValidationException):
            raise PreflightError(
                f"--application-id {application_id!r}: no such EMR Serverless application in {region}; use the "
                "Serverless stack's output ApplicationId (deploy it with -c serverless=true)"
            ) from None
    if application["state"] in APPLICATION_GONE_STATES:
        raise PreflightError(
            f"--application-id {application_id!r}: the application is {application['state']}; deploy the "
            "Serverless stack again and use its new ApplicationId"
        )
    return application["state"]


def start_job_run(
    client, *, application_id: str, role_arn: str, name: str, job_driver: dict, max_failed_per_hour: int
) -> str:
    """StartJobRun in STREAMING mode (no execution timeout; EMR Serverless retries a failed run)."""
    response = client.start_job_run(
        applicationId=application_id,
        executionRoleArn=role_arn,
        name=name,
        mode="STREAMING",
        retryPolicy={"maxFailedAttemptsPerHour": max_failed_per_hour},
        jobDriver=job_driver,
    )
    return response["jobRunId"]


def run_outcome(job_run: dict, *, stopping: bool) -> str | None:
    """For a GetJobRun `jobRun`: None while it may still end, else its final state (SUCCESS, or CANCELLED when
    we stopped it). Raises JobRunFailedError for FAILED, and for CANCELLED we did not ask for."""
    state = job_run["state"]
    if state in SUCCESS_STATES or (state == "CANCELLED" and stopping):
        return state
    if state in FAILED_STATES:
        details = job_run.get("stateDetails") or "no details"
        raise JobRunFailedError(f"job run {job_run['jobRunId']} {state}: {details}")
    return None


def wait_for_job_run(
    client,
    application_id: str,
    job_run_id: str,
    *,
    timeout_s: float,
    run_s: float | None = None,
    stopping: bool = False,
    poll_s: float = 15.0,
    report: Callable[[str], None] = print,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Poll the job run until it ends, reporting each change and a heartbeat each minute; with `run_s`, stop it
    that long after it started RUNNING (`stopping`: it was stopped already, so CANCELLED is the expected end).
    Returns the final state; raises JobRunFailedError or TimeoutError."""
    start = clock()
    running_since: float | None = None
    last_seen, last_report = None, start
    while True:
        job_run = client.get_job_run(applicationId=application_id, jobRunId=job_run_id)["jobRun"]
        state, elapsed = job_run["state"], clock() - start
        if state != last_seen or clock() - last_report >= 60:
            report(f"[{elapsed:6.0f}s] job run {job_run_id} {state}")
            last_seen, last_report = state, clock()
        outcome = run_outcome(job_run, stopping=stopping)
        if outcome is not None:
            return outcome
        if state == "RUNNING" and running_since is None:
            running_since = clock()
        if run_s is not None and running_since is not None and not stopping and clock() - running_since >= run_s:
            report(f"[{elapsed:6.0f}s] stopping job run {job_run_id} after {run_s:g} s of RUNNING")
            stop_job_run(client, application_id, job_run_id)
            stopping = True
        if elapsed >= timeout_s:
            raise TimeoutError(
                f"job run {job_run_id} still {state} after {elapsed:.0f} s (timeout {timeout_s:g} s); it keeps "
                f"running: stop it with `python -m infra.submit_step --serverless --application-id {application_id} "
                f"--stop {job_run_id} --region <region>`"
            )
        sleep(min(poll_s, max(timeout_s - elapsed, 0.0)))


def stop_job_run(client, application_id: str, job_run_id: str) -> None:
    """CancelJobRun with a grace period, so the running micro-batch can finish and commit."""
    client.cancel_job_run(
        applicationId=application_id, jobRunId=job_run_id, shutdownGracePeriodInSeconds=SHUTDOWN_GRACE_SECONDS
    )


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = OneLineParser(prog="python -m infra.submit_step --serverless", description=__doc__.split("\n\n")[0])
    parser.add_argument("--application-id", required=True, help="the Serverless stack output ApplicationId")
    parser.add_argument("--region", required=True, help="region of the application and the streams")
    parser.add_argument("--stop", metavar="JOB_RUN_ID", help="stop this job run (and wait until it is CANCELLED)")
    parser.add_argument("--job-role-arn", help="the Access stack output ServerlessJobRoleArn")
    parser.add_argument("--venv-uri", help="the Serverless stack output VenvArchiveUri (the packed environment)")
    parser.add_argument("--bucket", help="the Storage stack output BucketName (code, checkpoints, markers)")
    parser.add_argument("--source-stream")
    parser.add_argument("--sink-stream")
    parser.add_argument(
        "--job", default="country_counts", help=f"one of: {', '.join(job_names())} (default: %(default)s)"
    )
    parser.add_argument("--profile", help="AWS profile to use (default: the default credential chain)")
    parser.add_argument("--allow-unknown-region", action="store_true", help="accept a --region botocore lacks")
    parser.add_argument(
        "--endpoint-url", type=endpoint_url, help="AWS endpoint for EMR Serverless and S3 (tests: a local moto server)"
    )
    seconds = number(0, unit="seconds")
    parser.add_argument("--run-seconds", type=seconds, help="stop the run this long after it started RUNNING")
    parser.add_argument("--max-failed-attempts-per-hour", type=number(0, whole=True), default=5)
    parser.add_argument("--timeout-seconds", type=seconds, default=3600.0, help="(default: %(default)g)")
    parser.add_argument("--poll-seconds", type=seconds, default=15.0, help="(default: %(default)g)")
    parser.add_argument("--no-wait", action="store_true", help="start and return the job run id")
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if args.stop is None:
        needed = ("job_role_arn", "venv_uri", "bucket", "source_stream", "sink_stream")
        missing = [f"--{name.replace('_', '-')}" for name in needed if not getattr(args, name)]
        if missing:
            parser.error(f"to start a job run, also give {', '.join(missing)} (the stacks' outputs, docs/infra.md)")
    return args, extra


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args, extra = parse_args([a for a in argv if a != "--serverless"])
    try:
        return _run(args, extra)
    except PreflightError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code


def _run(args: argparse.Namespace, extra: list[str]) -> int:
    if args.stop is None:
        check_job(args.job)
    session = preflight.open_session(
        args.region, args.profile, service="emr-serverless", allow_unknown_region=args.allow_unknown_region
    )
    preflight.check_credentials(session)
    client = session.client("emr-serverless", endpoint_url=args.endpoint_url)
    check_application(client, args.application_id, args.region)
    if args.stop is not None:
        return _stop(client, args)
    s3 = session.client("s3", endpoint_url=args.endpoint_url)
    preflight.check_bucket(s3, args.bucket, args.region)
    with preflight.aws_errors(f"--bucket {args.bucket!r}"):
        code = upload_code(s3, args.bucket, args.job)
    job_args = packaging.job_arguments(
        job=args.job,
        source_stream=args.source_stream,
        sink_stream=args.sink_stream,
        region=args.region,
        bucket=args.bucket,
        extra=extra,
    )
    driver = packaging.serverless_job_driver(
        job_uri=code.job_uri, pyfiles_uri=code.pyfiles_uri, venv_uri=args.venv_uri, job_args=job_args
    )
    with preflight.aws_errors(f"--application-id {args.application_id!r}"):
        job_run_id = start_job_run(
            client,
            application_id=args.application_id,
            role_arn=args.job_role_arn,
            name=args.job,
            job_driver=driver,
            max_failed_per_hour=args.max_failed_attempts_per_hour,
        )
    print(f"started streaming job run {job_run_id} ({args.job}) on {args.application_id}; code at {code.pyfiles_uri}")
    if args.no_wait:
        return EXIT_OK
    return _wait(client, args, job_run_id, args.run_seconds)


def _stop(client, args: argparse.Namespace) -> int:
    with preflight.aws_errors(f"--stop {args.stop!r}"):
        try:
            stop_job_run(client, args.application_id, args.stop)
        except client.exceptions.ResourceNotFoundException:
            raise PreflightError(
                f"--stop {args.stop!r}: no such job run on application {args.application_id}; "
                "`aws emr-serverless list-job-runs --application-id ...` lists them"
            ) from None
    print(f"stopping job run {args.stop} (grace period {SHUTDOWN_GRACE_SECONDS} s)")
    return _wait(client, args, args.stop, run_s=None, stopping=True)


def _wait(client, args: argparse.Namespace, job_run_id: str, run_s: float | None, *, stopping: bool = False) -> int:
    try:
        with preflight.aws_errors(f"job run {job_run_id}"):
            state = wait_for_job_run(
                client,
                args.application_id,
                job_run_id,
                timeout_s=args.timeout_seconds,
                run_s=run_s,
                stopping=stopping,
                poll_s=args.poll_seconds,
            )
    except JobRunFailedError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_FAILED
    except TimeoutError as error:
        print(f"timeout: {error}", file=sys.stderr)
        return EXIT_TIMEOUT
    print(f"job run {job_run_id} {state}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
