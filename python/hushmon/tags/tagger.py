"""``hushmon tag``'s work: the stored jobs' facts, the rules, the job_tags rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from hushmon.datadir import DataDir
from hushmon.errors import HushmonError
from hushmon.history.records import TABLE as RECORDS
from hushmon.history.records import table_exists
from hushmon.tags.evaluate import JobTag, Outcome, evaluate
from hushmon.tags.facts import facts_from_digest, read_digest
from hushmon.tags.rules import RuleSet


@dataclass
class TagRun:
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # job -> why it was not tagged
    changed: list[str] = field(default_factory=list)


def stored_jobs(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Every job the store knows: its samples (the jobs view) and the job history."""
    jobs: list[str] = []
    if table_exists(con, "jobs", ("job",)):
        jobs += [str(r[0]) for r in con.execute("SELECT job FROM jobs").fetchall()]
    if table_exists(con, RECORDS, ("job",)):
        jobs += [str(r[0]) for r in con.execute(f"SELECT DISTINCT job FROM {RECORDS}").fetchall()]
    return sorted(set(jobs), key=lambda j: (len(j), j))


def record_states(con: duckdb.DuckDBPyConnection, jobs: list[str]) -> dict[str, str]:
    """Each job's state in its newest history record (job.state)."""
    if not jobs or not table_exists(con, RECORDS, ("job", "state", "recorded_ns")):
        return {}
    rows = con.execute(
        f"""SELECT job, state FROM {RECORDS} WHERE list_contains(?, job)
            QUALIFY row_number() OVER (PARTITION BY job ORDER BY recorded_ns DESC) = 1""",
        [jobs],
    ).fetchall()
    return {str(j): str(s) for j, s in rows if s}


def job_facts(data: DataDir, store: Path, job: str, state: str, build: bool) -> dict[str, Any]:
    """The facts of ``job``; its digest is built first when it has none (and
    ``build``): the store must not be open for writing meanwhile."""
    digest_json = data.reports(job) / "digest.json"
    if not digest_json.exists():
        if not build:
            raise HushmonError(f"no digest ({digest_json}): run 'hushmon digest {job}'")
        from hushmon.digest.build import build_digest  # heavy: only when a digest is missing

        build_digest(store, job, data.reports(job), None, None)
    facts = facts_from_digest(read_digest(digest_json))
    if state:
        facts["job.state"] = state
    return facts


def tag_jobs(
    data: DataDir,
    store: Path,
    jobs: list[str],
    states: dict[str, str],
    rules: RuleSet,
    build: bool,
    progress: Callable[[str], None] = lambda _line: None,
) -> TagRun:
    run = TagRun()
    for job in jobs:
        try:
            facts = job_facts(data, store, job, states.get(job, ""), build)
        except HushmonError as exc:
            run.skipped[job] = str(exc)
            progress(f"job {job}: not tagged: {exc}")
            continue
        run.outcomes[job] = evaluate(job, facts, rules)
    return run


def new_tags(run: TagRun) -> dict[str, list[JobTag]]:
    return {job: outcome.tags for job, outcome in run.outcomes.items()}
