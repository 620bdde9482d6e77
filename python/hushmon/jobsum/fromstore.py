"""A job's summary from hushmon's own data: its digest.json (figures,
findings), the job history's newest record (user, state) and job_tags."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import duckdb

from hushmon.datadir import DataDir
from hushmon.errors import HushmonError
from hushmon.history.records import TABLE as RECORDS
from hushmon.history.records import table_exists
from hushmon.jobsum.summary import JobSummary
from hushmon.tags.facts import read_digest
from hushmon.tags.store import tags_of

REPORT_URL_ENV = "HUSHMON_REPORT_URL"  # e.g. https://hushmon.site/job/{job} (hushmon serve)
SEVERITY_ORDER = ("high", "medium", "low", "info")


def report_link(data: DataDir, job: str) -> str:
    template = os.environ.get(REPORT_URL_ENV, "").strip()
    if template:
        return template.replace("{job}", job)
    return str(data.reports(job) / "report.html")


def _sensor(digest: dict[str, Any], name: str, stat: str) -> float | None:
    for s in digest.get("sensors", []) or []:
        if isinstance(s, dict) and s.get("name") == name:
            v = s.get(stat)
            return float(v) if isinstance(v, int | float) else None
    return None


def first_sentence(text: str, limit: int = 200) -> str:
    head = text.split(". ")[0].strip()
    return (head if head.endswith(".") else head + ".")[:limit] if head else ""


def summary_from_digest(job: str, digest_json: Path) -> JobSummary:
    d = read_digest(digest_json)
    s = JobSummary(job=job)
    s.nodes = len(d.get("nodes") or [])
    if isinstance(d.get("duration_s"), int | float):
        s.elapsed_s = float(d["duration_s"])
    s.cpu_busy_pct = _sensor(d, "cpu.busy_pct", "avg")
    s.mem_peak_bytes = _sensor(d, "mem.used_bytes", "max")
    s.gpu_busy_pct = _sensor(d, "gpu.sm_pct", "avg")
    findings = [f for f in d.get("findings", []) if isinstance(f, dict)]
    rank = {sev: i for i, sev in enumerate(SEVERITY_ORDER)}
    findings.sort(key=lambda f: rank.get(str(f.get("severity")), len(rank)))
    if findings and findings[0].get("severity") != "info":
        s.main_finding = f"{findings[0].get('title', '')} ({findings[0].get('severity')})"
        s.hint = first_sentence(str(findings[0].get("hint", "")))
    return s


def summary_from_store(data: DataDir, store: Path, job: str) -> JobSummary:
    digest_json = data.reports(job) / "digest.json"
    if not digest_json.exists():
        raise HushmonError(f"job {job}: no digest in {digest_json.parent} (hushmon digest {job})")
    s = summary_from_digest(job, digest_json)
    s.report = report_link(data, job)
    s.source = f"hushmon's store ({store})"
    if not store.exists():
        return s
    from hushmon.store.schema import open_store_readonly

    con = open_store_readonly(store)
    try:
        _from_records(con, s)
    finally:
        con.close()
    return s


def _from_records(con: duckdb.DuckDBPyConnection, s: JobSummary) -> None:
    tags = [t.tag for t in tags_of(con, s.job)]
    if table_exists(con, RECORDS, ("job", "owner", "state", "tags", "recorded_ns")):
        row = con.execute(
            f"SELECT owner, state, tags FROM {RECORDS} WHERE job = ? "
            "ORDER BY recorded_ns DESC LIMIT 1",
            [s.job],
        ).fetchone()
        if row:
            s.user, s.state = str(row[0] or ""), str(row[1] or "")
            if not tags and not table_exists(con, "job_tags", ("job",)):
                tags = str(row[2] or "").split()
    s.tags = tags
