"""The record ``hushmon run`` leaves of the jobs it watched (records.py):
owner, name, end state and the digest's findings, into the store the
digest was built from.

Under Slurm, its accounting names the job, its user and state (``sacct``,
when it answers, else ``scontrol show job`` while slurmctld keeps the
job); otherwise the record says what ``hushmon run`` saw: the
user who ran it, the program (not its launcher), the exit code."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb

from hushmon.errors import HushmonError
from hushmon.history.records import (
    JobRecord,
    from_digest,
    job_name,
    login_name,
    record_job,
    state_of,
)

SACCT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class SlurmJob:
    user: str
    name: str
    state: str


def sacct_job(job: str) -> SlurmJob | None:
    """Slurm's account of ``job`` (None without Slurm accounting)."""
    sacct = shutil.which("sacct")
    if sacct is None or not job.replace("_", "").replace("+", "").isdigit():
        return None
    try:
        out = subprocess.run(
            [sacct, "-j", job, "-X", "-n", "-P", "-o", "JobID,User,JobName,State"],
            capture_output=True, text=True, timeout=SACCT_TIMEOUT_S, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in out.stdout.splitlines() if out.returncode == 0 else []:
        cols = line.split("|")
        if len(cols) == 4 and cols[0] == job and cols[1]:
            # "CANCELLED by 0" -> CANCELLED
            return SlurmJob(cols[1], cols[2], cols[3].split()[0] if cols[3] else "")
    return None


def scontrol_job(job: str) -> SlurmJob | None:
    """What slurmctld still knows of ``job`` (a site without accounting:
    it keeps an ended job for MinJobAge, 300 s by default)."""
    scontrol = shutil.which("scontrol")
    if scontrol is None or not job.replace("_", "").replace("+", "").isdigit():
        return None
    try:
        out = subprocess.run(
            [scontrol, "show", "job", "-o", job],
            capture_output=True, text=True, timeout=SACCT_TIMEOUT_S, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    fields = dict(word.partition("=")[::2] for word in out.stdout.split() if "=" in word)
    user = fields.get("UserId", "").partition("(")[0]
    if not user or fields.get("JobId") != job:
        return None
    return SlurmJob(user, fields.get("JobName", ""), fields.get("JobState", ""))


def slurm_job(job: str) -> SlurmJob | None:
    return sacct_job(job) or scontrol_job(job)


def run_records(
    jobs: list[str],
    command: list[str],
    exit_code: int,
    interrupted_by: int | None,
    span_ns: tuple[int, int],
    reports: Callable[[str], Path],
) -> list[JobRecord]:
    records = []
    for job in jobs:
        slurm = slurm_job(job)
        uid = os.getuid()
        record = JobRecord(
            job=job,
            owner=slurm.user if slurm else login_name(uid),
            uid=uid if slurm is None else -1,
            name=slurm.name if slurm and slurm.name else job_name(command),
            state=slurm.state if slurm and slurm.state else state_of(exit_code, interrupted_by),
            exit_code=exit_code,
            start_ns=span_ns[0],
            end_ns=span_ns[1],
            source="run",
        )
        digest_json = reports(job) / "digest.json"
        if digest_json.exists():
            from_digest(record, digest_json)
            # the job's own span: the command's start and end, not its first sample
            record.start_ns, record.end_ns = span_ns
        records.append(record)
    return records


def record_run(
    store: Path,
    jobs: list[str],
    command: list[str],
    exit_code: int,
    interrupted_by: int | None,
    span_ns: tuple[int, int],
    reports: Callable[[str], Path],
    warn: Callable[[str], None],
) -> None:
    """Append the records; trouble is a warning (the job has run)."""
    try:
        records = run_records(jobs, command, exit_code, interrupted_by, span_ns, reports)
        record_job(store, records)
    except (HushmonError, OSError, duckdb.Error) as exc:
        # the job has run and its exit code is the contract: a warning, not a traceback
        warn(f"recording the job in the job history of {store}: {str(exc).splitlines()[0]}")
