"""The lake under several processes: whole commits only, concurrent creation,
compaction that changes no answer and keeps a running reader's files."""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pytest

from hushmon.errors import HushmonError
from hushmon.store.lake import (
    LAKE_SCHEMA_VERSION,
    CommitStats,
    is_transient,
    lake_commit,
    open_lake,
    open_lake_readonly,
)
from hushmon.store.lake_compact import compact
from hushmon.store.lake_files import live_files
from hushmon.store.lake_status import lake_status

GROUP_ROWS = 20_000

# A writer process: appends GROUPS groups of GROUP_ROWS rows, each one commit;
# with PAUSE_EVERY > 0 it waits for a line on stdin after every PAUSE_EVERY-th
# group but the last, so that a test can see the lake between its commits.
_WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from hushmon.store.lake import lake_commit, open_lake
    lake, groups, rows, start, tag, pause_every = Path(sys.argv[1]), int(sys.argv[2]), \\
        int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
    time.sleep(max(0.0, start - time.time()))
    con = open_lake(lake)
    for g in range(groups):
        def body(c, g=g):
            c.execute(
                "INSERT INTO samples SELECT ? * 1000 + i % 100, (? * ? + i) * 1000000000, "
                "random() FROM range(?) t(i)", [tag, g, rows, rows]).fetchall()
        lake_commit(con, body)
        if pause_every and (g + 1) % pause_every == 0 and g + 1 < groups:
            sys.stdin.readline()
    con.close()
    """
)


def _writer(
    lake: Path, groups: int, start: float, tag: int = 1, pause_every: int = 0
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            _WRITER,
            str(lake),
            str(groups),
            str(GROUP_ROWS),
            str(start),
            str(tag),
            str(pause_every),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_reader_sees_only_whole_groups_while_a_writer_appends(tmp_path: Path) -> None:
    lake = tmp_path / "w.lake"
    open_lake(lake).close()
    # The reader opens first: opening loads DuckDB's extensions, which on a
    # loaded machine once took longer than the writer's 12 commits.
    reader = open_lake_readonly(lake)
    # The writer waits after every 4th group until this reader has seen it: on
    # CI's loaded VM all 12 commits once landed between two of its reads.
    pause_every = 4
    writer = _writer(lake, groups=12, start=time.time(), pause_every=pause_every)
    assert writer.stdin is not None
    next_pause_rows = pause_every * GROUP_ROWS
    deadline = time.monotonic() + 300
    counts = []
    statuses = []
    try:
        while writer.poll() is None:
            if time.monotonic() > deadline:
                writer.kill()
                pytest.fail(f"the writer did not finish in 300 s; counts so far {counts}")
            # each count in its own transaction: the newest snapshot each time
            counts.append(int(reader.execute("SELECT count(*) FROM samples").fetchone()[0]))
            if len(statuses) < 2 and counts[-1] > 0:  # `store status` while it writes
                statuses.append(lake_status(lake, None)["tiers"]["raw"]["rows"])
            # the writer waits at each pause but the last group: let it go on
            if next_pause_rows < 12 * GROUP_ROWS and counts[-1] >= next_pause_rows:
                writer.stdin.write("go\n")
                writer.stdin.flush()
                next_pause_rows += pause_every * GROUP_ROWS
            time.sleep(0.02)
        _out, err = writer.communicate()
        assert writer.returncode == 0, err
        counts.append(int(reader.execute("SELECT count(*) FROM samples").fetchone()[0]))
    finally:
        reader.close()
    assert counts[-1] == 12 * GROUP_ROWS
    assert all(b >= a for a, b in itertools.pairwise(counts)), counts
    assert all(c % GROUP_ROWS == 0 for c in counts), counts  # never half a group
    # the reader did read during the writes: at least each pause's count
    assert {4 * GROUP_ROWS, 8 * GROUP_ROWS} <= set(counts), counts
    assert statuses and all(r % GROUP_ROWS == 0 and r > 0 for r in statuses), statuses


def test_two_processes_create_a_fresh_lake_at_once(tmp_path: Path) -> None:
    lake = tmp_path / "fresh.lake"
    start = time.time() + 1.0  # both past their imports, then open together
    procs = [_writer(lake, groups=3, start=start, tag=t) for t in (1, 2)]
    for p in procs:
        _out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    con = open_lake_readonly(lake)
    try:
        assert con.execute("SELECT count(*) FROM samples").fetchone()[0] == 6 * GROUP_ROWS
        tables = con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE database_name = 'lake'"
        ).fetchone()[0]
        assert tables >= 13  # every table made once, by one of them
    finally:
        con.close()


def _answers(lake: Path) -> list[tuple[object, ...]]:
    con = open_lake_readonly(lake)
    try:
        return con.execute(
            "SELECT series_id, count(*), round(sum(value), 6), min(value), max(value), "
            "min(time_ns), max(time_ns) FROM samples GROUP BY ALL ORDER BY ALL"
        ).fetchall()
    finally:
        con.close()


def test_compaction_changes_no_answer_and_merges_files(tmp_path: Path) -> None:
    lake = tmp_path / "c.lake"
    con = open_lake(lake)
    for g in range(8):  # big groups (files) and small ones (inlined in the catalog)
        rows = 5000 if g % 2 else 40
        con.execute(
            "INSERT INTO samples SELECT i % 7, (? * 10000 + i) * 1000000000, "
            "round(random() * 100, 3) FROM range(?) t(i)",
            [g, rows],
        ).fetchall()
    files_before = len([f for f in live_files(con) if f.table == "samples"])
    con.close()
    before = _answers(lake)
    report = compact(lake, now_ns=9 * 10_000 * 10**9, grace_s=0, settle_s=0)
    assert _answers(lake) == before
    con = open_lake_readonly(lake)
    try:
        files_after = len([f for f in live_files(con) if f.table == "samples"])
        rolled = con.execute("SELECT sum(count) FROM samples_1m").fetchone()[0]
    finally:
        con.close()
    assert files_before == 4 and files_after == 1, (files_before, files_after)
    assert report.flushed_tables >= 1 and report.files_merged >= 4
    assert rolled == sum(r[1] for r in before)  # every raw value is in a rollup
    assert report.files_deleted >= 4 and report.bytes_deleted > 0


def test_a_running_reader_keeps_its_files_through_compaction(tmp_path: Path) -> None:
    lake = tmp_path / "r.lake"
    con = open_lake(lake)
    for g in range(4):
        con.execute(
            "INSERT INTO samples SELECT i % 5, (? * 1000 + i) * 1000000000, i "
            "FROM range(1000) t(i)",
            [g],
        ).fetchall()
    con.close()
    reader = open_lake_readonly(lake)
    try:
        # the files a query started now would read (its snapshot's list)
        planned = [
            r[0]
            for r in reader.execute(
                "SELECT data_file FROM ducklake_list_files('lake', 'samples')"
            ).fetchall()
        ]
        report = compact(lake, now_ns=10**15)  # the default grace period
        # the 4 planned files, and the rollups' rows flushed before the rewrite
        assert report.files_merged >= 4 and report.files_deleted == 0
        assert report.pending_files >= 4 and report.pending_bytes > 0
        # still on disk and whole: a scan begun before the merge finishes
        total = reader.execute(
            "SELECT count(*), sum(value) FROM read_parquet(?)", [planned]
        ).fetchone()
        assert total == (4000, 4 * 499_500)
        # a new query reads the merged file: same answer
        assert reader.execute("SELECT count(*), sum(value) FROM samples").fetchone() == total
    finally:
        reader.close()
    report = compact(lake, now_ns=10**15, grace_s=0)  # no reader to protect
    assert report.files_deleted >= 4 and not any(Path(f).exists() for f in planned)


def test_lake_commit_retries_only_what_another_writer_causes(tmp_path: Path) -> None:
    con = open_lake(tmp_path / "t.lake")
    try:
        calls = []

        def flaky(c: duckdb.DuckDBPyConnection) -> int:
            calls.append(1)
            if len(calls) < 3:
                raise duckdb.TransactionException("Failed to commit DuckLake transaction: conflict")
            c.execute("INSERT INTO samples VALUES (1, 1, 1.0)").fetchall()
            return 7

        stats = CommitStats()
        assert lake_commit(con, flaky, stats) == 7
        assert (stats.commits, stats.retries, len(calls)) == (1, 2, 3)
        with pytest.raises(duckdb.CatalogException):
            lake_commit(con, lambda c: c.execute("SELECT * FROM nope").fetchall(), stats)
        assert stats.retries == 2  # a real error is raised at once, not retried
        with pytest.raises(HushmonError, match="failed 2 times"):
            lake_commit(
                con,
                lambda c: (_ for _ in ()).throw(duckdb.IOException("database is locked")),
                attempts=2,
            )
        assert con.execute("SELECT count(*) FROM samples").fetchone()[0] == 1
    finally:
        con.close()
    assert not is_transient(ValueError("database is locked"))


def test_a_schema_1_lake_with_inlined_rows_is_migrated(tmp_path: Path) -> None:
    lake = tmp_path / "old.lake"
    con = open_lake(lake)
    # back to what schema 1 made: no rollups or policy, version 1, a few rows
    # inlined in the catalog (DuckDB 1.5.5 crashed setting the inlining
    # option on such a lake: it is a session setting now)
    for table in ("samples_1m", "lake_policy"):
        con.execute(f"DROP TABLE {table}").fetchall()
    con.execute("DELETE FROM hushmon_schema").fetchall()
    con.execute("INSERT INTO hushmon_schema VALUES (1, current_timestamp)").fetchall()
    con.execute("INSERT INTO samples VALUES (1, 60000000000, 2.5)").fetchall()
    con.close()
    con = open_lake(lake)
    try:
        versions = con.execute("SELECT version FROM hushmon_schema ORDER BY 1").fetchall()
        assert versions == [(1,), (LAKE_SCHEMA_VERSION,)]  # migrated in one step
        assert con.execute("SELECT count(*) FROM samples_1m").fetchone()[0] == 0
    finally:
        con.close()
    report = compact(lake, now_ns=10**15, grace_s=0)
    assert report.rollup_rows_added == 1


def test_compaction_while_a_writer_appends(tmp_path: Path) -> None:
    lake = tmp_path / "busy.lake"
    open_lake(lake).close()
    writer = _writer(lake, groups=10, start=time.time())
    reports = []
    while writer.poll() is None:
        reports.append(compact(lake, now_ns=10**15, settle_s=0))
    _out, err = writer.communicate()
    assert writer.returncode == 0, err  # the writer never failed
    reports.append(compact(lake, now_ns=10**15, settle_s=0))
    assert len(reports) >= 2
    con = open_lake_readonly(lake)
    try:
        assert con.execute("SELECT count(*) FROM samples").fetchone()[0] == 10 * GROUP_ROWS
        # every value rolled up exactly once, though groups landed mid-compaction
        assert con.execute("SELECT sum(count) FROM samples_1m").fetchone()[0] == 10 * GROUP_ROWS
    finally:
        con.close()
