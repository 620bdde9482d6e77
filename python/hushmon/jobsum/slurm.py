"""Slurm's side of a job summary: its record (``scontrol show job``,
``sacct``) and the AdminComment hushmon writes there at job end.

``scontrol update ... AdminComment=`` needs Slurm's operator or admin
rights (SlurmUser, root): a site runs it from the controller's epilog
(EpilogSlurmctld) or a node epilog as root; ``hushmon run`` tries it at the
end and says so when Slurm refuses. ``sacct -o AdminComment`` needs
accounting storage (slurmdbd: the test bed has its own); without it
(``AccountingStorageType=accounting_storage/none``) the comment lives only
in the controller's job record while Slurm keeps the job (MinJobAge).
Reading prefers sacct, so a job the controller has forgotten is found."""

from __future__ import annotations

import re
import shutil
import subprocess

from hushmon.jobsum.summary import JobSummary, from_comment

TIMEOUT_S = 10.0
_JOBID = re.compile(r"[0-9]+([_+][0-9]+)?")
_UNITS = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50}


def is_slurm_id(job: str) -> bool:
    return bool(_JOBID.fullmatch(job))


def _run(argv: list[str]) -> tuple[int, str, str]:
    exe = shutil.which(argv[0])
    if exe is None:
        return 127, "", f"{argv[0]} not found"
    try:
        out = subprocess.run([exe, *argv[1:]], capture_output=True, text=True,
                             timeout=TIMEOUT_S, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 1, "", str(exc)
    return out.returncode, out.stdout, out.stderr.strip()


def scontrol_job(job: str) -> dict[str, str] | None:
    """``scontrol show job -o``'s Key=Value fields (None: Slurm does not know it)."""
    if not is_slurm_id(job):
        return None
    rc, out, _err = _run(["scontrol", "show", "job", "-o", job])
    if rc != 0 or not out.strip():
        return None
    fields: dict[str, str] = {}
    for word in out.splitlines()[0].split():
        key, eq, value = word.partition("=")
        if eq:
            fields.setdefault(key, value)
    return fields


def mem_bytes(text: str) -> float | None:
    """Slurm's memory figure ('4000M', '4G', '512' = MiB) in bytes."""
    m = re.fullmatch(r"([0-9.]+)([KMGTP]?)", text.strip())
    if not m or float(m.group(1)) <= 0:
        return None
    return float(m.group(1)) * _UNITS.get(m.group(2) or "M", 2**20)


def requested_mem_per_node(fields: dict[str, str]) -> float | None:
    if fields.get("MinMemoryNode"):
        return mem_bytes(fields["MinMemoryNode"])
    tres = dict(
        part.partition("=")[::2] for part in fields.get("ReqTRES", "").split(",") if "=" in part
    )
    total = mem_bytes(tres.get("mem", "")) if tres.get("mem") else None
    nodes = int(fields.get("NumNodes", "1").split("-")[0] or 1)
    return total / max(1, nodes) if total else None


def summary_from_slurm(job: str) -> JobSummary | None:
    """hushmon's AdminComment from accounting (sacct), else from the
    controller (scontrol), None when neither holds one."""
    if not is_slurm_id(job):
        return None
    rc, out, _err = _run(["sacct", "-j", job, "-X", "-n", "-P", "-o", "JobID,User,AdminComment"])
    if rc == 0:
        for line in out.splitlines():
            cols = line.split("|", 2)
            if len(cols) == 3 and cols[0] == job and (s := from_comment(cols[2])):
                s.user, s.source = cols[1], "Slurm accounting (sacct -o AdminComment)"
                return s
    fields = scontrol_job(job)
    if fields and (s := from_comment(fields.get("AdminComment", ""))):
        s.user = fields.get("UserId", "").split("(")[0]
        s.source = "Slurm's controller (scontrol show job: AdminComment)"
        return s
    return None


def set_admin_comment(job: str, text: str) -> str:
    """'' when Slurm took it, else why not (one line)."""
    rc, _out, err = _run(["scontrol", "update", f"JobId={job}", f"AdminComment={text}"])
    return "" if rc == 0 else (err.splitlines()[-1] if err else f"scontrol exited {rc}")
