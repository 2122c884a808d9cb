"""The sample jobs' code as a submitter ships it: the job's entry file checked, the jobs' --py-files zip and the entry
uploaded under a content-addressed prefix.

Who calls it: ``infra.submit_step`` (EMR steps) and ``infra.submit_serverless`` (EMR Serverless job runs).
"""

from __future__ import annotations

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


def check_job(job: str, root: Path | None = None) -> Path:
    """The job's entry file, or a PreflightError naming --job and the jobs that exist."""
    try:
        entry = packaging.job_entry(job, root or packaging.PROJECT_ROOT)
    except ValueError as error:
        raise PreflightError(f"--job: {error}") from None
    if not entry.is_file():
        jobs = sorted(p.stem for p in entry.parent.glob("*.py") if not p.stem.startswith("_"))
        raise PreflightError(f"--job {job!r}: no spark_app/{job}.py; the jobs are: {', '.join(jobs) or 'none'}")
    return entry
