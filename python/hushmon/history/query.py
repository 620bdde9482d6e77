"""Searching the job history (records.py): filters, sort, one page.

A job's record is its newest row. The search joins the rows that pass
every filter to each job's newest ``recorded_ns`` (two narrow columns,
grouped): a row that passes but is not its job's newest drops out at the
join, so every filter is pushed into the scan of the rows, and those on
what never changes between a job's rows (its id, owner and start) into the
grouping's scan too, where DuckDB skips the row groups (the embedded
file's zone maps) or Parquet files (the lake's per-file min/max) that
cannot hold them."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import duckdb

from hushmon.errors import HushmonError
from hushmon.history.records import COLUMNS, SEVERITIES, TABLE, JobRecord, table_exists, words

MAX_PER_PAGE = 500
DEFAULT_PER_PAGE = 50
# column name in the page -> SQL expression it sorts by
SORTS = {
    "job": "TRY_CAST(job AS BIGINT) {dir} NULLS LAST, job {dir}",
    "owner": "owner {dir}",
    "name": "name {dir}",
    "state": "state {dir}",
    "start": "start_ns {dir}",
    "end": "end_ns {dir} NULLS FIRST",
    "duration": "(coalesce(end_ns, start_ns) - start_ns) {dir}",
    "nodes": "nodes {dir}",
    "worst": "CASE worst "
    + " ".join(f"WHEN '{s}' THEN {len(SEVERITIES) - i}" for i, s in enumerate(SEVERITIES))
    + " ELSE 0 END {dir}",
}
_TOKEN = re.compile(r"[A-Za-z0-9_.:+-]+")


@dataclass
class JobQuery:
    """One search. ``viewer``: the only owner whose jobs may come back (None: an admin)."""

    viewer: str | None = None
    owner: str = ""
    name: str = ""  # a part of the name, any case
    job: str = ""  # an id, or its start with a trailing '*'
    state: str = ""
    tag: str = ""
    factor: str = ""  # a finding's factor
    severity: str = ""  # ... at this severity or worse
    since_ns: int | None = None
    until_ns: int | None = None
    sort: str = "start"
    descending: bool = True
    page: int = 1
    per_page: int = DEFAULT_PER_PAGE

    def check(self) -> JobQuery:
        if self.sort not in SORTS:
            raise HushmonError(f"sort must be one of {', '.join(SORTS)}")
        if not 1 <= self.per_page <= MAX_PER_PAGE:
            raise HushmonError(f"per_page must be 1..{MAX_PER_PAGE}")
        if self.page < 1:
            raise HushmonError("page must be 1 or more")
        if self.severity and self.severity not in SEVERITIES:
            raise HushmonError(f"severity must be one of {', '.join(SEVERITIES)}")
        for name in ("tag", "factor", "state"):
            value = getattr(self, name)
            if value and not _TOKEN.fullmatch(value):
                raise HushmonError(f"{name} {value!r}: letters, digits and _.:+- only")
        return self


@dataclass
class JobPage:
    records: list[JobRecord]
    total: int
    query: JobQuery
    tags_from: str = "records"  # or "job_tags" when a tagger's table is there
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def pages(self) -> int:
        return max(1, math.ceil(self.total / self.query.per_page))


def parse_time(text: str, what: str) -> int | None:
    """'' -> None; an ISO date/time (UTC unless it says) or seconds since
    1970 -> ns."""
    text = text.strip()
    if not text:
        return None
    try:
        return int(float(text) * 1e9)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise HushmonError(
            f"{what} {text!r}: an ISO date (2026-11-27T10:00) or epoch seconds"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1e9)


def _tags_table(con: duckdb.DuckDBPyConnection) -> bool:
    """A tagger's ``job_tags`` (job, tag, ...) is there to search."""
    return table_exists(con, "job_tags", ("job", "tag"))


def search(con: duckdb.DuckDBPyConnection, q: JobQuery) -> JobPage:
    q.check()
    if not table_exists(con, TABLE):
        return JobPage([], 0, q)
    inner: list[str] = []
    outer: list[str] = []
    args: list[Any] = []
    # immutable columns first: they prune files and row groups
    if q.viewer is not None:
        inner.append("owner = ?")
        args.append(q.viewer)
    if q.owner:
        inner.append("owner = ?")
        args.append(q.owner)
    if q.job:
        if q.job.endswith("*"):
            inner.append("starts_with(job, ?)")
            args.append(q.job[:-1])
        else:
            inner.append("job = ?")
            args.append(q.job)
    if q.since_ns is not None:
        inner.append("start_ns >= ?")
        args.append(q.since_ns)
    if q.until_ns is not None:
        inner.append("start_ns <= ?")
        args.append(q.until_ns)
    outer_args: list[Any] = []
    if q.name:
        outer.append("contains(lower(name), ?)")
        outer_args.append(q.name.lower())
    if q.state:
        outer.append("state = ?")
        outer_args.append(q.state.upper())
    tags_from = "records"
    if q.tag:
        if _tags_table(con):
            tags_from = "job_tags"
            outer.append("(contains(tags, ?) OR job IN (SELECT job FROM job_tags WHERE tag = ?))")
            outer_args += [f" {q.tag} ", q.tag]
        else:
            outer.append("contains(tags, ?)")
            outer_args.append(f" {q.tag} ")
    if q.factor or q.severity:
        wanted = SEVERITIES[: SEVERITIES.index(q.severity) + 1] if q.severity else SEVERITIES
        factor = q.factor or ""
        alts = [f" {factor}:{s} " if factor else f":{s} " for s in wanted]
        outer.append("(" + " OR ".join("contains(findings, ?)" for _ in alts) + ")")
        outer_args += alts
    # Each job's newest row: the newest (job, recorded_ns) pairs (two narrow
    # columns, grouped), joined back to the rows that pass every filter.
    # A row that passes but is not its job's newest drops out at the join,
    # so the filters can be pushed into the scan of the rows.
    where_in = f"WHERE {' AND '.join(inner)}" if inner else ""
    filters = inner + outer
    where_all = f"WHERE {' AND '.join(filters)}" if filters else ""
    order = SORTS[q.sort].format(dir="DESC" if q.descending else "ASC")
    cols = ", ".join(COLUMNS)
    newest = f"""
        SELECT r.* FROM (SELECT {cols} FROM {TABLE} {where_all}) r
        JOIN (SELECT job, max(recorded_ns) AS newest FROM {TABLE} {where_in} GROUP BY job) n
          ON r.job = n.job AND r.recorded_ns = n.newest"""
    params = [*args, *outer_args, *args]
    rows = con.execute(
        f"SELECT {cols}, count(*) OVER () AS total FROM ({newest}) t "
        f"ORDER BY {order}, job LIMIT ? OFFSET ?",
        [*params, q.per_page, (q.page - 1) * q.per_page],
    ).fetchall()
    if rows:
        total = int(rows[0][-1])
    else:
        total = int(con.execute(f"SELECT count(*) FROM ({newest}) t", params).fetchall()[0][0])
    records = [JobRecord(*row[: len(COLUMNS)]) for row in rows]
    if records and _tags_table(con):
        tags_from = "job_tags"
        _add_tagger_tags(con, records)
    return JobPage(records, total, q, tags_from)


def _add_tagger_tags(con: duckdb.DuckDBPyConnection, records: list[JobRecord]) -> None:
    """A page's jobs get the tagger's tags (``hushmon tag``'s job_tags: the
    NHR job classes) ahead of the ones their findings gave."""
    rows = con.execute(
        "SELECT job, list(DISTINCT tag ORDER BY tag) FROM job_tags "
        "WHERE list_contains(?, job) GROUP BY job",
        [[r.job for r in records]],
    ).fetchall()
    tagged = {str(job): [str(t) for t in tags] for job, tags in rows}
    for r in records:
        extra = tagged.get(r.job, [])
        if extra:
            r.tags = words([*extra, *(t for t in r.tags.split() if t not in extra)])


def find_record(con: duckdb.DuckDBPyConnection, job: str, viewer: str | None) -> JobRecord | None:
    """A job's newest record, None when there is none the viewer may see
    (the same answer for a job of someone else's as for no job: nothing leaks)."""
    page = search(con, JobQuery(viewer=viewer, job=job.rstrip("*") or "-", per_page=1))
    return page.records[0] if page.records else None


def owners_of(con: duckdb.DuckDBPyConnection, jobs: list[str]) -> dict[str, str]:
    """The owner on record of each of ``jobs`` (the live view's jobs)."""
    if not jobs or not table_exists(con, TABLE):
        return {}
    rows = con.execute(
        f"SELECT DISTINCT job, owner FROM {TABLE} WHERE list_contains(?, job) AND owner <> ''",
        [jobs],
    ).fetchall()
    return {str(j): str(o) for j, o in rows}
