"""The store's ``job_tags`` table: a job's current tags, one row per tag.

The job history (hushmon/history/query.py) searches it beside
``job_records.tags`` (``job IN (SELECT job FROM job_tags WHERE tag = ?)``),
so the table holds a job's *current* tags only. Like ``job_records`` it is
made by its first writer (``CREATE TABLE IF NOT EXISTS``, both stores: no
schema version to bump). Writing is idempotent and cheap to repeat: a job
whose tags, rules and hints are unchanged is not written at all, so
``hushmon tag --all`` on an unchanged store writes nothing (on the lake, no
new files); a job whose tags changed has its rows deleted and written again
in one transaction (one delete file and one data file per ``tag`` run on
the lake, whatever the number of jobs)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import duckdb

from hushmon.history.records import table_exists
from hushmon.store.lake import is_lake
from hushmon.store.transaction import store_transaction
from hushmon.tags.evaluate import JobTag

TABLE = "job_tags"
CREATE_TABLE = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    job VARCHAR, tag VARCHAR, rule VARCHAR, hint VARCHAR, tagged_ns BIGINT)"""

Key = tuple[str, str, str]


def current_tags(con: duckdb.DuckDBPyConnection, jobs: Sequence[str]) -> dict[str, set[Key]]:
    """Each job's stored (tag, rule, hint)s."""
    if not jobs or not table_exists(con, TABLE):
        return {}
    rows = con.execute(
        f"SELECT job, tag, rule, hint FROM {TABLE} WHERE list_contains(?, job)", [list(jobs)]
    ).fetchall()
    out: dict[str, set[Key]] = {}
    for job, tag, rule, hint in rows:
        out.setdefault(str(job), set()).add((str(tag), str(rule), str(hint)))
    return out


def changed_jobs(con: duckdb.DuckDBPyConnection, new: dict[str, list[JobTag]]) -> list[str]:
    have = current_tags(con, list(new))
    return [
        job
        for job, tags in new.items()
        if {(t.tag, t.rule, t.hint) for t in tags} != have.get(job, set())
    ]


def _replace(con: duckdb.DuckDBPyConnection, new: dict[str, list[JobTag]], jobs: list[str]) -> None:
    con.execute(CREATE_TABLE).fetchall()
    con.execute(f"DELETE FROM {TABLE} WHERE list_contains(?, job)", [jobs]).fetchall()
    now = time.time_ns()
    rows = [[t.job, t.tag, t.rule, t.hint, now] for job in jobs for t in new[job]]
    if rows:
        con.executemany(f"INSERT INTO {TABLE} VALUES (?, ?, ?, ?, ?)", rows)


def write_tags(
    con: duckdb.DuckDBPyConnection, store: Path, new: dict[str, list[JobTag]]
) -> list[str]:
    """Make the stored tags of ``new``'s jobs what ``new`` says; returns the
    jobs that changed (the others were not touched)."""
    jobs = changed_jobs(con, new)
    if not jobs:
        return []
    store_transaction(con, is_lake(store), lambda c: _replace(c, new, jobs))
    return jobs


def tags_of(con: duckdb.DuckDBPyConnection, job: str) -> list[JobTag]:
    if not table_exists(con, TABLE):
        return []
    rows = con.execute(
        f"SELECT job, tag, rule, hint FROM {TABLE} WHERE job = ? ORDER BY tag", [job]
    ).fetchall()
    return [JobTag(*map(str, r)) for r in rows]
