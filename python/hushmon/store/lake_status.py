"""``hushmon store status``: what a store holds and what the next compaction
would do, read without stopping anyone.

A lake is attached read-only (collectors go on committing meanwhile); sizes,
file counts and time ranges come from the catalog, not from scanning data.
The embedded DuckDB file is opened read-only too (DuckDB refuses that while
a writer holds it: the reason the lake exists).
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from hushmon.store.lake import is_lake, open_lake_readonly
from hushmon.store.lake_compact import DEFAULT_GRACE_S, plan_for
from hushmon.store.lake_files import (
    RAW_TABLE,
    ROLLUP_TABLE,
    SUMMARY_TABLES,
    live_files,
    pending_deletion,
)
from hushmon.store.lake_retention import read_policy
from hushmon.store.lake_summaries_compact import DEFAULT_CLOSE_S, pending_summary_periods


def _tier(files: list[Any]) -> dict[str, Any]:
    size = sum(f.size_bytes for f in files)
    rows = sum(f.rows - f.deleted_rows for f in files)
    mins = [f.min_time_ns for f in files if f.min_time_ns is not None]
    maxs = [f.max_time_ns for f in files if f.max_time_ns is not None]
    return {
        "bytes": size,
        "files": len(files),
        "mean_file_bytes": size // len(files) if files else 0,
        "rows": rows,
        # From the files' statistics: a straddling file's deleted rows still count.
        "oldest_ns": min(mins) if mins else None,
        "newest_ns": max(maxs) if maxs else None,
    }


def lake_status(lake: Path, reports: Path | None, now_ns: int | None = None) -> dict[str, Any]:
    now_ns = time.time_ns() if now_ns is None else now_ns
    con = open_lake_readonly(lake)
    try:
        files = live_files(con)
        plan, sizes = plan_for(con, lake, reports, now_ns)
        pending = pending_deletion(con, lake)
        policy = read_policy(con)
        summary_periods = pending_summary_periods(con, now_ns, DEFAULT_CLOSE_S)
        snapshots = con.execute(
            "SELECT count(*) FROM __ducklake_metadata_lake.ducklake_snapshot"
        ).fetchone()
    finally:
        con.close()
    summaries = [f for f in files if f.table in SUMMARY_TABLES]
    other = [f for f in files if f.table not in (RAW_TABLE, ROLLUP_TABLE, *SUMMARY_TABLES)]
    jobs = sum(1 for p in reports.iterdir() if p.is_dir()) if reports and reports.is_dir() else 0
    budget = policy.budget_bytes
    return {
        "store": str(lake),
        "kind": "lake",
        "now_ns": now_ns,
        "tiers": {
            "raw": _tier([f for f in files if f.table == RAW_TABLE]),
            "rollups": _tier([f for f in files if f.table == ROLLUP_TABLE]),
            # in files only: rows still inlined in the catalog count once
            # a compaction has flushed them (its first steps)
            "summaries": _tier(summaries),
            "other_tables": {"bytes": sizes.other, "files": len(other)},
            "catalog": {"bytes": sizes.catalog},
            "digests": {"bytes": sizes.digests, "jobs": jobs, "folder": str(reports)},
        },
        "total_bytes": sizes.total,
        "files": sizes.files,
        "snapshots": int(snapshots[0]) if snapshots else 0,
        "policy": asdict(policy),
        "budget_bytes": budget,
        "budget_used": sizes.total / budget if budget else None,
        "next_compaction": {
            "cuts": [asdict(c) for c in plan.cuts],
            "frees_bytes_estimate": plan.freed_bytes,
            "over_budget_after_bytes": plan.over_budget_after_bytes,
            "budget_floor_ns": plan.floor_ns,
            "summary_periods_to_store": summary_periods,
        },
        "pending_deletion": {
            "files": pending.files,
            "bytes": pending.size_bytes,
            "oldest_scheduled_utc": pending.oldest_scheduled,
            "grace_s": DEFAULT_GRACE_S,
        },
    }


def embedded_status(db: Path) -> dict[str, Any]:
    """What applies to the embedded DuckDB file: its size, samples, time range."""
    from hushmon.store.schema import open_store_readonly

    con = open_store_readonly(db)
    try:
        row = con.execute("SELECT count(*), min(time_ns), max(time_ns) FROM samples").fetchone()
        series = con.execute("SELECT count(*) FROM series").fetchone()
        jobs = con.execute("SELECT count(*) FROM jobs").fetchone()
    finally:
        con.close()
    assert row is not None and series is not None and jobs is not None
    wal = db.with_name(db.name + ".wal")
    size = db.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    return {
        "store": str(db),
        "kind": "embedded",
        "total_bytes": size,
        "samples": int(row[0]),
        "bytes_per_sample": size / row[0] if row[0] else None,
        "oldest_ns": row[1],
        "newest_ns": row[2],
        "series": int(series[0]),
        "jobs": int(jobs[0]),
        "note": "the embedded store has no tiers, budget or compaction: see docs/store.md",
    }


def store_status(path: Path, reports: Path | None, now_ns: int | None = None) -> dict[str, Any]:
    if is_lake(path):
        return lake_status(path, reports, now_ns)
    return embedded_status(path)
