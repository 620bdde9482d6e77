"""A job's record in the store's job history: who ran it, under what name,
how it ended, and what its digest found; one row per version, appended.

The samples know hosts and times only (``job_activity``): the owner, the
name and the end state come from whoever saw the job start and end
(``hushmon run``, Slurm's accounting), and the findings from its digest.
``hushmon serve``'s jobs page searches these rows; a site with 100,000
jobs must not group ``job_activity`` (one row per node and period) to list
them.

Rows are only appended, never updated (the lake has no UPDATE worth its
delete files): a job's newest row (largest ``recorded_ns``) is its record.
``owner`` and ``start_ns`` never change between a job's rows, so a filter
on them may be applied before the newest row is picked; that is what lets
the store prune (DuckDB's zone maps, the lake's per-file statistics).
"""

from __future__ import annotations

import json
import os
import pwd
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import duckdb

from hushmon.errors import HushmonError
from hushmon.store.lake import is_lake
from hushmon.store.transaction import store_transaction

TABLE = "job_records"
SEVERITIES = ("high", "medium", "low", "info")
# Slurm's state names where one fits, so a site reads them as in sacct.
RUNNING, COMPLETED, FAILED, CANCELLED = "RUNNING", "COMPLETED", "FAILED", "CANCELLED"

CREATE_TABLE = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    job VARCHAR, owner VARCHAR, uid BIGINT, name VARCHAR, state VARCHAR,
    exit_code INTEGER, start_ns BIGINT, end_ns BIGINT, nodes INTEGER, hosts VARCHAR,
    findings VARCHAR, worst VARCHAR, main_finding VARCHAR, tags VARCHAR,
    report VARCHAR, source VARCHAR, recorded_ns BIGINT)"""
# The embedded file: a job's rows found by the index, not a scan.
CREATE_INDEX = f"CREATE INDEX IF NOT EXISTS {TABLE}_job ON {TABLE} (job)"


@dataclass
class JobRecord:
    job: str
    owner: str = ""  # login name; "" = not known (admins see it only)
    uid: int = -1
    name: str = ""
    state: str = ""
    exit_code: int | None = None
    start_ns: int = 0
    end_ns: int | None = None
    nodes: int = 0
    hosts: str = ""  # space-separated
    # " factor:severity factor:severity " (spaces around each, so a search
    # for one finding is one LIKE on this column)
    findings: str = ""
    worst: str = ""  # the highest severity among the findings ("" = none)
    main_finding: str = ""  # the worst finding's title
    tags: str = ""  # " tag tag " (same convention)
    report: str = ""  # the report folder, relative to the data folder's reports/
    source: str = ""  # who wrote the row: run, index, slurm
    recorded_ns: int = field(default_factory=time.time_ns)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["findings"] = self.finding_list()
        out["tags"] = self.tags.split()
        out["hosts"] = self.hosts.split()
        return out

    def finding_list(self) -> list[dict[str, str]]:
        return [
            {"factor": f.partition(":")[0], "severity": f.partition(":")[2]}
            for f in self.findings.split()
        ]


COLUMNS = tuple(f.name for f in fields(JobRecord))


def words(items: Iterable[str]) -> str:
    """Items as a space-delimited column value with a space at each end
    (so ``LIKE '% x %'`` finds one whole item); '' when there are none."""
    cleaned = [i.strip().replace(" ", "_") for i in items if i.strip()]
    return f" {' '.join(cleaned)} " if cleaned else ""


def from_digest(record: JobRecord, digest_json: Path) -> JobRecord:
    """``record`` with the findings, span and nodes of a job's digest.json."""
    try:
        d = json.loads(digest_json.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise HushmonError(f"cannot read {digest_json}: {exc}") from exc
    findings = [f for f in d.get("findings", []) if isinstance(f, dict)]
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    findings.sort(key=lambda f: rank.get(str(f.get("severity")), len(SEVERITIES)))
    # one item per (factor, severity): a factor may find several things
    record.findings = words(
        dict.fromkeys(f"{f.get('factor')}:{f.get('severity')}" for f in findings)
    )
    record.worst = str(findings[0].get("severity", "")) if findings else ""
    record.main_finding = str(findings[0].get("title", "")) if findings else ""
    # Until a tagger writes job_tags, a job's tags are its findings' factors
    # (medium and worse: a low finding is not a class of job).
    if not record.tags:
        record.tags = words(
            sorted(
                {str(f.get("factor")) for f in findings if f.get("severity") in ("high", "medium")}
            )
        )
    hosts = d.get("nodes") or []
    if hosts and not record.hosts:
        record.hosts = " ".join(str(h) for h in hosts)
        record.nodes = len(hosts)
    if not record.start_ns and isinstance(d.get("start_ns"), int):
        record.start_ns = d["start_ns"]
    if record.end_ns is None and isinstance(d.get("end_ns"), int):
        record.end_ns = d["end_ns"]
    record.report = digest_json.parent.name
    return record


def login_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def state_of(exit_code: int, interrupted_by: int | None) -> str:
    if interrupted_by:
        return CANCELLED
    return COMPLETED if exit_code == 0 else FAILED


LAUNCHERS = ("srun", "mpirun", "mpiexec", "mpiexec.hydra", "mpiexec.mpich", "orterun", "prun")


def job_name(command: Sequence[str]) -> str:
    """What a person calls the job: the program, not its launcher
    (``srun -N 4 build/bin/butterfly`` -> ``butterfly``): the first word
    after a launcher that names an executable file."""
    if not command:
        return ""
    first = os.path.basename(command[0])
    if first not in LAUNCHERS:
        return first
    for word in command[1:]:
        if word.startswith("-"):
            continue
        path = Path(word)
        if path.is_file() and os.access(path, os.X_OK):
            return path.name
    return first


def table_exists(con: duckdb.DuckDBPyConnection, name: str, columns: Sequence[str] = ()) -> bool:
    """``name`` is a table (or view) of the store with ``columns``. Asked by
    reading no rows of it: on a lake, listing the tables (duckdb_tables())
    costs ~70 ms of CPU, this ~5."""
    try:
        con.execute(f"SELECT {', '.join(columns) or '*'} FROM {name} LIMIT 0").fetchall()
    except (duckdb.CatalogException, duckdb.BinderException):
        return False
    return True


def _append(con: duckdb.DuckDBPyConnection, records: Sequence[JobRecord]) -> None:
    con.execute(CREATE_TABLE).fetchall()
    marks = ", ".join("?" for _ in COLUMNS)
    con.executemany(
        f"INSERT INTO {TABLE} ({', '.join(COLUMNS)}) VALUES ({marks})",
        [[getattr(r, c) for c in COLUMNS] for r in records],
    )


def write_records(
    con: duckdb.DuckDBPyConnection, store: Path, records: Sequence[JobRecord]
) -> None:
    """Append ``records`` to the store opened as ``con`` (writable) at ``store``."""
    if not records:
        return
    lake = is_lake(store)

    def body(c: duckdb.DuckDBPyConnection) -> None:
        _append(c, records)
        if not lake:  # a lake has no indexes
            c.execute(CREATE_INDEX).fetchall()

    store_transaction(con, lake, body)


def record_job(store: Path, records: Sequence[JobRecord]) -> None:
    """Open the store for writing, append, close (``hushmon run``'s end)."""
    from hushmon.store.schema import open_store

    con = open_store(store, create=False)
    try:
        write_records(con, store, records)
    finally:
        con.close()
