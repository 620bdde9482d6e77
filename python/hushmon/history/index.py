"""Records for the jobs the store holds that nobody recorded: jobs a
collector stored from agents Slurm told of (prolog, cgroups) that ran
without ``hushmon run``.

``hushmon serve index`` (from a timer, like ``hushmon store compact``)
groups the recent part of ``job_activity`` (``--since-days``: the scan
reads only the row groups / files of that span) into one row per job, and
appends a record for each job without one whose newest period is older
than ``settle_s`` (it has ended, or the next run takes it): owner, name and
state from Slurm (``sacct``, else ``scontrol``) when it knows the job,
else none (only admins see such a job); nodes and span from the samples;
findings from its digest when one was built."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from hushmon.datadir import DataDir
from hushmon.history.records import TABLE, JobRecord, from_digest, table_exists, write_records
from hushmon.history.run_record import SlurmJob, slurm_job

DAY_NS = 86_400 * 10**9


@dataclass
class IndexReport:
    seen: int = 0  # jobs with activity in the span
    recorded_before: int = 0
    added: int = 0
    from_slurm: int = 0
    with_digest: int = 0
    settling: int = 0  # seen lately: left for the next run
    seconds: float = 0.0

    def line(self) -> str:
        return (
            f"{self.seen} job(s) in the span: {self.recorded_before} had a record, "
            f"{self.added} added ({self.from_slurm} named by Slurm, {self.with_digest} with a "
            f"digest), {self.settling} still running or just ended (next time); "
            f"{self.seconds:.1f} s"
        )


def index_jobs(
    store: Path,
    data: DataDir,
    since_days: float = 7.0,
    settle_s: float = 120.0,
    now_ns: int | None = None,
    slurm: bool = True,
) -> IndexReport:
    from hushmon.store.schema import open_store

    began = time.perf_counter()
    now_ns = time.time_ns() if now_ns is None else now_ns
    report = IndexReport()
    con = open_store(store, create=False)
    try:
        since_ns = now_ns - int(since_days * DAY_NS)
        spans = con.execute(
            "SELECT job, count(DISTINCT host), min(time_ns), max(time_ns), "
            "string_agg(DISTINCT host, ' ' ORDER BY host) "
            "FROM job_activity WHERE time_ns >= ? GROUP BY job",
            [since_ns],
        ).fetchall()
        report.seen = len(spans)
        known: set[str] = set()
        if spans and table_exists(con, TABLE):
            rows = con.execute(
                f"SELECT DISTINCT job FROM {TABLE} WHERE list_contains(?, job)",
                [[str(s[0]) for s in spans]],
            ).fetchall()
            known = {str(r[0]) for r in rows}
        report.recorded_before = len(known)
        records = []
        for job, nodes, start_ns, end_ns, hosts in spans:
            job = str(job)
            if job in known:
                continue
            if now_ns - int(end_ns) < settle_s * 1e9:
                report.settling += 1
                continue
            record = JobRecord(job=job, nodes=int(nodes), start_ns=int(start_ns),
                               end_ns=int(end_ns), hosts=str(hosts), source="index")  # fmt: skip
            found: SlurmJob | None = slurm_job(job) if slurm else None
            if found is not None:
                record.owner, record.name, record.state = found.user, found.name, found.state
                report.from_slurm += 1
            digest = data.reports(job) / "digest.json"
            if digest.exists():
                from_digest(record, digest)
                report.with_digest += 1
            records.append(record)
        write_records(con, store, records)
        report.added = len(records)
    finally:
        con.close()
    report.seconds = time.perf_counter() - began
    return report
