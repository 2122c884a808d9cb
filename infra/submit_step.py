"""Submit a sample job as an EMR step to a running cluster and wait for it, printing progress.

    python -m infra.submit_step --cluster-id j-XXXX --bucket <BucketName output> \\
        --source-stream kinesis-spark-source --sink-stream kinesis-spark-sink --region eu-west-1 \\
        [--profile dev] [--job country_counts] [--timeout-seconds 3600] [--no-wait] [-- extra job arguments]

Before it uploads anything it checks what a user can get wrong (`infra.preflight`): the job name, the region
(botocore's partition data; `--allow-unknown-region` for a region newer than botocore), the profile and the
credentials, the bucket (exists, reachable, in that region) and the cluster (exists, not terminating). Then it
zips `spark_app/` (the jobs' own code) and uploads the zip and the job's entry file under
`s3://<bucket>/code/<content hash>/` (so a re-submit never replaces code a running step uses), then adds a
command-runner.jar step with the same `spark-submit` command as the stack's own step (`infra.packaging`). The
connector is the wheel the cluster's bootstrap action installed: a new connector version needs a new cluster.
Exit codes: 0 step completed (or submitted, with --no-wait), 1 step failed/cancelled or cluster gone,
2 a flag's value is wrong (unknown region, profile, job, bucket or cluster), 3 timed out while the step was still
pending or running, 4 AWS cannot be used (no or refused credentials, access denied, endpoint unreachable).
Every error is one line on stderr. With `--serverless` it starts a streaming job run on the EMR Serverless
application instead (`infra.submit_serverless`, which documents its flags).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from infra import packaging, preflight
from infra.job_code import check_job, job_names, upload_code
from infra.preflight import EXIT_AWS, EXIT_FAILED, EXIT_OK, EXIT_TIMEOUT, EXIT_USAGE, PreflightError
from infra.wheelhouse import TARGET
from pyspark_aws_kinesis.cli import OneLineParser, endpoint_url, number

DONE_STATES = {"COMPLETED"}
FAILED_STATES = {"FAILED", "CANCELLED", "INTERRUPTED"}
CLUSTER_GONE_STATES = {"TERMINATING", "TERMINATED", "TERMINATED_WITH_ERRORS"}
__all__ = ["EXIT_AWS", "EXIT_FAILED", "EXIT_OK", "EXIT_TIMEOUT", "EXIT_USAGE"]


class StepFailedError(RuntimeError):
    """The step ended in FAILED/CANCELLED/INTERRUPTED, or its cluster terminated under it."""


class StepTimeoutError(TimeoutError):
    """The step was still pending or running when the wait's time ran out (the step itself goes on)."""


def check_cluster(emr, cluster_id: str, region: str) -> str:
    """The cluster exists in `region` and still takes steps; returns its state."""
    if not preflight.CLUSTER_ID_RE.match(cluster_id):
        raise PreflightError(f"--cluster-id {cluster_id!r}: not a cluster id; use the stack output ClusterId (j-...)")
    with preflight.aws_errors(f"--cluster-id {cluster_id!r}"):
        try:
            state = emr.describe_cluster(ClusterId=cluster_id)["Cluster"]["Status"]["State"]
        except emr.exceptions.InvalidRequestException:
            raise PreflightError(
                f"--cluster-id {cluster_id!r}: no such cluster in {region}; use the stack output ClusterId "
                "(`aws emr list-clusters --active` lists the running ones)"
            ) from None
    if state in CLUSTER_GONE_STATES:
        raise PreflightError(
            f"--cluster-id {cluster_id!r}: the cluster is {state} and takes no more steps; deploy the Emr stack "
            "again (`npx cdk deploy KinesisSparkEmr`) and use its new ClusterId"
        )
    return state


def submit_step(emr, cluster_id: str, name: str, command: list[str], action_on_failure: str = "CONTINUE") -> str:
    """Add one command-runner.jar step running `command`; return its step id."""
    response = emr.add_job_flow_steps(
        JobFlowId=cluster_id,
        Steps=[
            {
                "Name": name,
                "ActionOnFailure": action_on_failure,
                "HadoopJarStep": {"Jar": "command-runner.jar", "Args": command},
            }
        ],
    )
    return response["StepIds"][0]


def step_outcome(step: dict) -> str | None:
    """For a DescribeStep `Step`: None while it may still finish, else its terminal state.

    Raises StepFailedError, with EMR's failure details, for a state that is not success.
    """
    status = step["Status"]
    state = status["State"]
    if state in DONE_STATES:
        return state
    if state in FAILED_STATES:
        details = status.get("FailureDetails") or {}
        reason = status.get("StateChangeReason", {}).get("Message")
        parts = [details.get("Reason"), details.get("Message") or reason, details.get("LogFile")]
        raise StepFailedError(f"step {step['Id']} {state}: " + "; ".join(p for p in parts if p))
    return None


def wait_for_step(
    emr,
    cluster_id: str,
    step_id: str,
    *,
    timeout_s: float,
    poll_s: float = 15.0,
    report: Callable[[str], None] = print,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Poll the step (and its cluster) until it ends; report each change and a heartbeat each minute.

    Returns the final state (COMPLETED); raises StepFailedError or StepTimeoutError.
    """
    start = clock()
    last_seen: tuple[str, str] | None = None
    last_report = start
    while True:
        step = emr.describe_step(ClusterId=cluster_id, StepId=step_id)["Step"]
        cluster_state = emr.describe_cluster(ClusterId=cluster_id)["Cluster"]["Status"]["State"]
        elapsed = clock() - start
        seen = (step["Status"]["State"], cluster_state)
        if seen != last_seen or clock() - last_report >= 60:
            report(f"[{elapsed:6.0f}s] step {step_id} {seen[0]} (cluster {cluster_id} {cluster_state})")
            last_seen, last_report = seen, clock()
        outcome = step_outcome(step)
        if outcome is not None:
            return outcome
        if cluster_state in CLUSTER_GONE_STATES:
            raise StepFailedError(f"step {step_id} is {seen[0]} but cluster {cluster_id} is {cluster_state}")
        if elapsed >= timeout_s:
            raise StepTimeoutError(
                f"step {step_id} still {seen[0]} after {elapsed:.0f} s (timeout {timeout_s:g} s); it keeps running "
                "on the cluster: cancel it with `aws emr cancel-steps` or by writing the job's stop marker"
            )
        sleep(min(poll_s, max(timeout_s - elapsed, 0.0)))


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    parser = OneLineParser(prog="python -m infra.submit_step", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cluster-id", required=True, help="the stack output ClusterId (j-...)")
    parser.add_argument("--bucket", required=True, help="the stack output BucketName (code, checkpoints, markers)")
    parser.add_argument("--source-stream", required=True)
    parser.add_argument("--sink-stream", required=True)
    parser.add_argument("--region", required=True, help="region of the cluster and the streams")
    parser.add_argument("--profile", help="AWS profile to use (default: the default credential chain)")
    parser.add_argument(
        "--allow-unknown-region", action="store_true", help="accept a --region that this botocore does not list yet"
    )
    parser.add_argument(
        "--job", default="country_counts", help=f"one of: {', '.join(job_names())} (default: %(default)s)"
    )
    parser.add_argument(
        "--python",
        default=TARGET.interpreter,
        help="Python that Spark runs on the cluster: the one the bootstrap action installed into (%(default)s)",
    )
    parser.add_argument(
        "--endpoint-url", type=endpoint_url, help="AWS endpoint for EMR and S3 (tests: a local moto server)"
    )
    seconds = number(0, unit="seconds")
    parser.add_argument("--timeout-seconds", type=seconds, default=3600.0, help="(default: %(default)g)")
    parser.add_argument("--poll-seconds", type=seconds, default=15.0, help="(default: %(default)g)")
    parser.add_argument("--no-wait", action="store_true", help="submit and return the step id")
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after `--` goes to the job unchanged (e.g. --trigger-seconds 30).
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    return args, extra


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--serverless" in argv[: argv.index("--") if "--" in argv else len(argv)]:
        from infra import submit_serverless  # loaded only when asked for

        return submit_serverless.main(argv)
    args, extra = parse_args(argv)
    try:
        return _run(args, extra)
    except PreflightError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code


def _run(args: argparse.Namespace, extra: list[str]) -> int:
    """Check everything that can be checked, then upload, submit and (unless --no-wait) wait."""
    check_job(args.job)
    session = preflight.open_session(
        args.region, args.profile, service="emr", allow_unknown_region=args.allow_unknown_region
    )
    preflight.check_credentials(session)
    s3 = session.client("s3", endpoint_url=args.endpoint_url)
    emr = session.client("emr", endpoint_url=args.endpoint_url)
    preflight.check_bucket(s3, args.bucket, args.region)
    check_cluster(emr, args.cluster_id, args.region)
    with preflight.aws_errors(f"--bucket {args.bucket!r}"):
        code = upload_code(s3, args.bucket, args.job)
    command = packaging.spark_submit_command(
        job_uri=code.job_uri,
        pyfiles_uri=code.pyfiles_uri,
        python=args.python,
        job_args=packaging.job_arguments(
            job=args.job,
            source_stream=args.source_stream,
            sink_stream=args.sink_stream,
            region=args.region,
            bucket=args.bucket,
            extra=extra,
        ),
    )
    with preflight.aws_errors(f"--cluster-id {args.cluster_id!r}"):
        step_id = submit_step(emr, args.cluster_id, args.job, command)
    print(f"submitted step {step_id} ({args.job}) to {args.cluster_id}; code at {code.pyfiles_uri}")
    if args.no_wait:
        return EXIT_OK
    try:
        with preflight.aws_errors(f"step {step_id}"):
            state = wait_for_step(
                emr, args.cluster_id, step_id, timeout_s=args.timeout_seconds, poll_s=args.poll_seconds
            )
    except StepFailedError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_FAILED
    except StepTimeoutError as error:
        print(f"timeout: {error}", file=sys.stderr)
        return EXIT_TIMEOUT
    print(f"step {step_id} {state}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
