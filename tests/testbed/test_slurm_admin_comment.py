"""Slurm's own record on the bed's real slurmctld and slurmdbd: ``hushmon
run`` inside an allocation (salloc, as in a batch script) puts hushmon's
summary into the job's AdminComment at its end; the controller shows it
(``scontrol show job``) and the bed's accounting stores it, so ``sacct -o
AdminComment`` shows it (slurmctld sends it to slurmdbd asynchronously:
polled), and ``hushmon job ID`` reads it back from accounting. A job srun
made for itself has ended by then, and Slurm refuses (Job has already
finished): ``hushmon run`` says so in one warning naming EpilogSlurmctld."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import pytest
from bedlib import bed_unavailable, bed_up, hushmon

from hushmon.testbed.livecheck import HUSHMON


def test_run_under_slurm_sets_admin_comment_and_job_reads_it() -> None:
    reason = bed_unavailable()
    if reason:
        pytest.skip(reason)
    with bed_up("--nodes", "2", "--racks", "1", "--period-ms", "500") as (info, data):
        env = {**os.environ, **info["env"]}
        salloc = shutil.which("salloc") or "salloc"
        argv = [salloc, "-N", "2", *HUSHMON, "run", "--data-dir", str(data), "--json", "-",
                "--", "srun", "-N", "2", "sleep", "6"]  # fmt: skip
        run = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=240,
                             check=False)  # fmt: skip
        assert run.returncode == 0, run.stderr
        job = json.loads(run.stdout)["job"]
        assert job.isdigit(), job
        assert "AdminComment" not in run.stderr, run.stderr  # no refusal warned
        # a job srun made for itself has ended when hushmon run ends: one warning
        alone = hushmon("run", "--data-dir", str(data), "--", "srun", "-N", "1", "sleep", "2",
                        timeout=180, env=env)  # fmt: skip
        assert alone.returncode == 0, alone.stderr
        assert alone.stderr.count("has ended (COMPLETED): Slurm takes an AdminComment") == 1
        scontrol = shutil.which("scontrol") or "scontrol"
        shown = subprocess.run([scontrol, "show", "job", "-o", job], capture_output=True,
                               text=True, env=env, timeout=30, check=False)  # fmt: skip
        assert shown.returncode == 0, shown.stderr
        comment = next(w for w in shown.stdout.split() if w.startswith("AdminComment="))
        body = json.loads(comment.removeprefix("AdminComment=hushmon1:"))
        assert body["job"] == job and body["nodes"] == 2
        # two sleeping nodes: CPUs hardly busy, and the tagger said so
        assert body["cpu_pct"] < 25, body
        assert "short_job" in body["tags"], body
        assert body["report"].endswith(f"reports/{job}/report.html")
        # the same text in accounting: sacct, as a site's users look
        stored = _sacct_admin_comment(job, env)
        assert stored == comment.removeprefix("AdminComment="), stored
        out = hushmon("job", job, "--data-dir", str(data), "--json", "-", env=env)
        assert out.returncode == 0, out.stderr
        summary = json.loads(out.stdout)
        assert summary["source"].startswith("Slurm accounting"), summary
        assert summary["user"] == "root" and summary["tags"] == body["tags"]
        assert "CPU Efficiency:" in out.stderr and f"Job ID: {job}" in out.stderr


def _sacct_admin_comment(job: str, env: dict[str, str], wait_s: float = 60.0) -> str:
    sacct = shutil.which("sacct") or "sacct"
    argv = [sacct, "-j", job, "-X", "-o", "AdminComment%500", "-P", "-n"]
    deadline = time.monotonic() + wait_s
    while True:
        out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30,
                             check=False)  # fmt: skip
        assert out.returncode == 0, out.stderr
        text = out.stdout.strip()
        if text or time.monotonic() > deadline:
            return text
        time.sleep(0.5)
