"""The sample jobs' code as a submitter ships it: the job's entry file checked, the jobs' --py-files zip and the entry
uploaded under a content-addressed prefix.

Who calls it: ``infra.submit_step`` (EMR steps) and ``infra.submit_serverless`` (EMR Serverless job runs).
"""

from __future__ import annotations

import ast
import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path

from infra import layout, packaging
from infra.preflight import PreflightError


@dataclass(frozen=True)
class CodeLocation:
    """Where the uploaded code is, as spark-submit wants it."""

    pyfiles_uri: str
    job_uri: str


def upload_code(s3, bucket: str, job: str, root: Path | None = None) -> CodeLocation:
    """Build the jobs' --py-files zip and upload it with the job's entry file under a content-addressed prefix
    (`root`: the checkout, packaging.PROJECT_ROOT unless given)."""
    root = root or packaging.PROJECT_ROOT
    entry = packaging.job_entry(job, root)
    if not entry.is_file():
        raise FileNotFoundError(f"job {job!r}: {entry} does not exist")
    with tempfile.TemporaryDirectory(prefix="submit-step-") as tmp:
        zip_path = packaging.build_pyfiles_zip(Path(tmp), root)
        digest = hashlib.sha256(zip_path.read_bytes() + entry.read_bytes()).hexdigest()[:16]
        prefix = f"{layout.CODE_PREFIX}{digest}/"
        s3.upload_file(str(zip_path), bucket, prefix + packaging.PYFILES_ZIP)
        s3.upload_file(str(entry), bucket, prefix + entry.name)
    return CodeLocation(f"s3://{bucket}/{prefix}{packaging.PYFILES_ZIP}", f"s3://{bucket}/{prefix}{entry.name}")


# What makes a module of spark_app/ a job (spark_app.common's contract): the rest (common, events, verdict, the
# demo) are the jobs' helpers or run on their own.
JOB_FUNCTIONS = frozenset({"parser", "start", "main"})


def is_job(path: Path) -> bool:
    """Whether `path` (a module of spark_app/) is a sample job: it defines parser(), start() and main()."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return False
    defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    return defined >= JOB_FUNCTIONS


def job_names(root: Path | None = None) -> list[str]:
    """The sample jobs under `root`'s spark_app/ (the checkout unless given), by module name."""
    folder = (root or packaging.PROJECT_ROOT) / "spark_app"
    return sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_") and is_job(p))


def check_job(job: str, root: Path | None = None) -> Path:
    """The job's entry file, or a PreflightError naming --job and the jobs that exist."""
    jobs = f"the jobs are: {', '.join(job_names(root)) or 'none'}"
    try:
        entry = packaging.job_entry(job, root or packaging.PROJECT_ROOT)
    except ValueError as error:
        raise PreflightError(f"--job: {error}; {jobs}") from None
    if not entry.is_file():
        raise PreflightError(f"--job {job!r}: no spark_app/{job}.py; {jobs}")
    if not is_job(entry):
        raise PreflightError(
            f"--job {job!r}: spark_app/{job}.py is not a job (no parser(), start() and main()); {jobs}"
        )
    return entry
