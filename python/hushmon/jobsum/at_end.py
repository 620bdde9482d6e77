"""What hushmon does for a job once it ended and has a digest: tag it
(job_tags) and, under Slurm, put its summary into the job's AdminComment.
Called by ``hushmon run``'s end path; a site's EpilogSlurmctld may call
``hushmon job ID --set-admin-comment`` instead (it runs as SlurmUser)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hushmon.datadir import DataDir
from hushmon.errors import HushmonError
from hushmon.jobsum.fromstore import summary_from_store
from hushmon.jobsum.slurm import requested_mem_per_node, scontrol_job, set_admin_comment
from hushmon.jobsum.summary import JobSummary

# The states in which scontrol update still takes an AdminComment (a
# finished job answers "Job has already finished"): under an allocation
# (sbatch, salloc) the job runs on after 'hushmon run'; EpilogSlurmctld
# sees it COMPLETING.
OPEN_STATES = ("RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING", "STOPPED")


def summary_for_comment(data: DataDir, store: Path, job: str) -> JobSummary:
    """The store's summary with Slurm's own figures where it has them
    (user, state, elapsed time, the memory requested per node)."""
    s = summary_from_store(data, store, job)
    fields = scontrol_job(job) or {}
    s.user = fields.get("UserId", "").split("(")[0] or s.user
    # under an allocation Slurm says RUNNING while the run's own end is known
    s.state = s.state or fields.get("JobState", "")
    s.mem_req_bytes = requested_mem_per_node(fields)
    return s


def tag_job(data: DataDir, store: Path, jobs: list[str]) -> None:
    from hushmon.store.schema import open_store
    from hushmon.tags.rules import load_rules, site_folder
    from hushmon.tags.store import write_tags
    from hushmon.tags.tagger import tag_jobs

    rules = load_rules(site_folder(None))
    run = tag_jobs(data, store, jobs, {}, rules, build=False)
    if run.outcomes:
        con = open_store(store, create=False)
        try:
            write_tags(con, store, {j: o.tags for j, o in run.outcomes.items()})
        finally:
            con.close()


def after_job(data: DataDir, store: Path, jobs: list[str], warn: Callable[[str], None]) -> None:
    """Tag the jobs, then write their AdminComment where Slurm knows them;
    trouble is a warning (the job has run)."""
    try:
        tag_job(data, store, jobs)
    except (HushmonError, OSError) as exc:
        warn(f"tagging {', '.join(jobs)}: {exc}")
    for job in jobs:
        fields = scontrol_job(job)
        if fields is None:
            continue  # not a Slurm job (or Slurm has forgotten it)
        if fields.get("JobState", "") not in OPEN_STATES:
            # srun made the job its own allocation, which ended with it
            warn(f"job {job} has ended ({fields.get('JobState', '?')}): Slurm takes an "
                 "AdminComment only while a job runs or completes; run 'hushmon run' inside "
                 f"the allocation (sbatch, salloc), or set it from EpilogSlurmctld: "
                 f"hushmon job {job} --set-admin-comment")  # fmt: skip
            continue
        try:
            text = summary_for_comment(data, store, job).to_comment()
        except (HushmonError, OSError) as exc:
            warn(f"job {job}: no summary for Slurm's AdminComment: {exc}")
            continue
        why = set_admin_comment(job, text)
        if why:
            warn(f"job {job}: Slurm refused the AdminComment ({why}); a site sets it from "
                 f"EpilogSlurmctld: hushmon job {job} --set-admin-comment")  # fmt: skip
