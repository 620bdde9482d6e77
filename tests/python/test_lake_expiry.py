"""`store compact` expires the snapshots older than its grace period by
their ids: DuckLake 1.0 with a SQLite catalog compares `older_than` by the
date only, which kept up to two days of a site's commits, and a commit's
cost grows with them (bench/bench_lake_commits.py --synthetic-snapshots)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import duckdb

from hushmon.store.lake import CommitStats, lake_commit, open_lake, open_lake_readonly
from hushmon.store.lake_compact import DEFAULT_GRACE_S, expire_snapshots


def _insert(lake: Path, first: int, count: int) -> list[int]:
    """``count`` one-row commits; their snapshot ids."""
    con = open_lake(lake)
    try:
        for i in range(first, first + count):

            def one_row(c: duckdb.DuckDBPyConnection, i: int = i) -> None:
                c.execute("INSERT INTO job_activity VALUES ('j', 'n1', ?)", [i]).fetchall()

            lake_commit(con, one_row)
        rows = con.execute(
            "SELECT snapshot_id FROM __ducklake_metadata_lake.ducklake_snapshot "
            "ORDER BY snapshot_id DESC LIMIT ?",
            [count],
        ).fetchall()
        return sorted(int(r[0]) for r in rows)
    finally:
        con.close()


def test_snapshots_older_than_the_grace_go_the_same_day(tmp_path: Path) -> None:
    lake = tmp_path / "e.lake"
    old = _insert(lake, 0, 4)
    db = sqlite3.connect(lake / "catalog.sqlite")
    try:  # as if committed an hour ago (the same UTC day but after midnight)
        db.executemany(
            "UPDATE ducklake_snapshot SET snapshot_time = "
            "strftime('%Y-%m-%d %H:%M:%f+00', 'now', '-3600 seconds') WHERE snapshot_id = ?",
            [(s,) for s in old],
        )
        db.commit()
    finally:
        db.close()
    recent = _insert(lake, 4, 2)

    con = open_lake(lake)
    try:  # the step of `store compact`, with its default grace (600 s)
        assert expire_snapshots(con, DEFAULT_GRACE_S, CommitStats()) == len(old)
    finally:
        con.close()

    con = open_lake_readonly(lake)
    try:
        left = {
            int(r[0])
            for r in con.execute(
                "SELECT snapshot_id FROM __ducklake_metadata_lake.ducklake_snapshot"
            ).fetchall()
        }
        rows = con.execute("SELECT count(*) FROM job_activity").fetchone()
    finally:
        con.close()
    assert not left & set(old), left
    assert set(recent) <= left  # younger than the grace
    assert rows == (6,)
