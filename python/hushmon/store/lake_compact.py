"""``hushmon store compact``: keep a lake fast and within its budget.

One run, each step its own commit (retried by :func:`lake_commit` when a
collector commits at the same moment, so collectors never stop):

1. flush rows inlined in the catalog into Parquet files;
2. build the 1-minute rollups ``samples_1m`` of every raw minute older than
   ``settle_s`` that has none yet (a day per commit);
3. retention (lake_retention.py): delete raw rows older than the policy's
   cut, after checking minute by minute that their rollups count the same
   rows (a late replay is rolled up again first), then old rollups, then
   the summaries older than theirs (every summary table in one commit;
   inlined rows that came meanwhile are flushed again after it). A DELETE
   that covers every row of a file drops the file from the new snapshot
   without writing a delete file; a file that straddles the cut gets a
   delete file and is rewritten by step 4;
4. rewrite files with deleted rows, merge small adjacent files (sorted by
   series and time: DuckLake sorts on merge);
5. expire snapshots older than ``grace_s`` (by their ids:
   :func:`expire_snapshots`) and delete files unreferenced for longer than
   ``grace_s`` (in practice up to the next UTC midnight after that:
   :func:`_older_than`): a reader keeps the snapshot it started with,
   so a digest shorter than the grace period never loses a file it planned
   to read;
6. delete orphans: files in the data folder that no snapshot names, last
   written more than ``grace_s`` ago (a collector that died between writing
   its group's files and committing them, store/lake_add_files.py; a live
   collector commits its files within seconds).

First of all, summaries of periods older than ``summary_close_s`` are
stored merged and their rack partials deleted, in one commit
(lake_summaries_compact.py): readers then read them at the cost of stored
rows.

DuckLake writes a Parquet file completely before its commit adds it to the
catalog, and readers see only committed snapshots: a reader never meets a
half-written file (tests/python/test_lake_store.py checks it).
"""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from hushmon.store.lake import LAKE_ALIAS, CommitStats, lake_commit, lake_commits, open_lake
from hushmon.store.lake_add_files import delete_orphans
from hushmon.store.lake_files import (
    META,
    RAW_TABLE,
    ROLLUP_TABLE,
    SUMMARY_TABLES,
    catalog_bytes,
    folder_bytes,
    live_files,
    pending_deletion,
)
from hushmon.store.lake_retention import (
    NS_PER_DAY,
    NS_PER_HOUR,
    NS_PER_MINUTE,
    NS_PER_S,
    SUMMARY_TIER,
    RetentionPlan,
    floor_minute,
    plan_retention,
    read_policy,
)
from hushmon.store.lake_summaries_compact import DEFAULT_CLOSE_S, store_closed_summaries

DEFAULT_GRACE_S = 600  # > the longest read (a 4096-node digest: about 60 s)
DEFAULT_SETTLE_S = 300  # > a collector's lag (p99 5 s) and an agent's short replay
# DuckDB's memory_limit for a compaction, which spills to <lake>/spill beyond
# it. DuckDB's own default is 80 % of the machine: compacting 26 minutes of
# 1000 agents peaked at 13.9 GiB resident, on the host where the collectors
# run; held to 2048 MiB, 2.45 GiB in 1.38x the time (docs/store.md,
# "Compaction's memory").
DEFAULT_MEMORY_MIB = 2048
# Files with at least this share of rows deleted are rewritten (retention's
# straddling files); below it a delete file costs less than a rewrite.
REWRITE_DELETE_SHARE = 0.05

_MINUTE_SQL = f"time_ns - time_ns % {NS_PER_MINUTE}"


@dataclass
class TierBytes:
    raw: int
    rollups: int
    other: int
    catalog: int
    digests: int
    files: int
    summaries: int = 0

    @property
    def total(self) -> int:
        return self.raw + self.rollups + self.summaries + self.other + self.catalog + self.digests


def tier_bytes(con: duckdb.DuckDBPyConnection, lake: Path, reports: Path | None) -> TierBytes:
    files = live_files(con)
    by = {RAW_TABLE: 0, ROLLUP_TABLE: 0, SUMMARY_TIER: 0}
    other = 0
    for f in files:
        tier = SUMMARY_TIER if f.table in SUMMARY_TABLES else f.table
        if tier in by:
            by[tier] += f.size_bytes
        else:
            other += f.size_bytes
    digests = folder_bytes(reports) if reports is not None else 0
    return TierBytes(
        by[RAW_TABLE],
        by[ROLLUP_TABLE],
        other,
        catalog_bytes(lake),
        digests,
        len(files),
        by[SUMMARY_TIER],
    )


@dataclass
class CompactReport:
    lake: str
    now_ns: int
    flushed_tables: int = 0
    rollup_rows_added: int = 0
    rollup_minutes_redone: int = 0
    raw_rows_deleted: int = 0
    rollup_rows_deleted: int = 0
    plan: dict[str, Any] = field(default_factory=dict)
    files_rewritten: int = 0
    files_merged: int = 0
    snapshots_expired: int = 0
    files_deleted: int = 0
    bytes_deleted: int = 0  # files removed from disk now (unreferenced > grace)
    orphans_deleted: int = 0  # files no snapshot ever named (a writer died before its commit)
    orphan_bytes_deleted: int = 0
    live_bytes_dropped: int = 0  # left the current snapshot now: on disk until the grace ends
    pending_files: int = 0
    pending_bytes: int = 0
    before: dict[str, int] = field(default_factory=dict)
    after: dict[str, int] = field(default_factory=dict)
    over_budget_bytes: int = 0
    summary_periods_stored: int = 0  # closed (job, period)s stored merged now
    summary_rows_stored: int = 0
    summary_partial_rows_deleted: int = 0
    summary_late_periods_merged: int = 0  # stored periods that took late partials
    summary_periods_rebuilt: int = 0  # overlapped periods rebuilt from raw again on closing
    summary_rows_expired: int = 0  # rows of the summary tables older than their cut
    commit_retries: int = 0
    seconds: float = 0.0
    memory_limit_mib: int = 0
    peak_rss_mib: float = 0.0  # this process's peak resident size at the end

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _call(con: duckdb.DuckDBPyConnection, sql: str, stats: CommitStats) -> list[tuple[Any, ...]]:
    return lake_commit(con, lambda c: c.execute(sql).fetchall(), stats)


def _flush(con: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
    return con.execute(f"CALL ducklake_flush_inlined_data('{LAKE_ALIAS}')").fetchall()


def _rewrite(con: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
    return con.execute(
        f"CALL ducklake_rewrite_data_files('{LAKE_ALIAS}', "
        f"delete_threshold => {REWRITE_DELETE_SHARE})"
    ).fetchall()


def build_rollups(
    con: duckdb.DuckDBPyConnection,
    upto_ns: int,
    stats: CommitStats,
    raw_range_ns: tuple[int, int] | None,
) -> int:
    """Roll every raw minute in [last rollup + 1 min, ``upto_ns``) up, an
    hour per commit (a short hold of the commit lock), skipping stretches
    without raw data; returns the rows added. ``raw_range_ns``: the oldest and
    newest raw time (None: no raw data)."""
    if raw_range_ns is None:
        return 0
    oldest_ns, newest_ns = raw_range_ns
    upto_ns = floor_minute(min(upto_ns, newest_ns + NS_PER_MINUTE))
    row = con.execute(f"SELECT max(minute_ns) FROM {ROLLUP_TABLE}").fetchone()
    start = floor_minute(oldest_ns)
    if row is not None and row[0] is not None:
        start = max(start, int(row[0]) + NS_PER_MINUTE)
    added = 0
    while start < upto_ns:
        end = min(upto_ns, (start // NS_PER_HOUR + 1) * NS_PER_HOUR)
        n = lake_commit(con, functools.partial(_insert_rollups, start_ns=start, end_ns=end), stats)
        added += n
        start = end
        if n == 0:  # a gap: go on from the next raw value
            nxt = con.execute(
                f"SELECT min(time_ns) FROM {RAW_TABLE} WHERE time_ns >= ?", [start]
            ).fetchone()
            if nxt is None or nxt[0] is None:
                break
            start = max(start, floor_minute(int(nxt[0])))
    return added


def _insert_rollups(con: duckdb.DuckDBPyConnection, start_ns: int, end_ns: int) -> int:
    row = con.execute(
        f"""INSERT INTO {ROLLUP_TABLE}
            SELECT series_id, {_MINUTE_SQL} AS minute_ns, count(*), sum(value), min(value),
                   max(value)
            FROM {RAW_TABLE} WHERE time_ns >= ? AND time_ns < ?
            GROUP BY ALL ORDER BY series_id, minute_ns""",
        [start_ns, end_ns],
    ).fetchone()
    return int(row[0]) if row else 0


def _expire_raw(con: duckdb.DuckDBPyConnection, cut_ns: int) -> tuple[int, int]:
    """Delete raw rows before ``cut_ns`` once every minute of them is rolled
    up with the same count (minutes that differ, from late data, are rolled
    up again in the same transaction). Returns (rows deleted, minutes redone)."""
    redo = [
        int(r[0])
        for r in con.execute(
            f"""WITH raw AS (
                    SELECT {_MINUTE_SQL} AS minute_ns, count(*) AS n FROM {RAW_TABLE}
                    WHERE time_ns < ? GROUP BY ALL),
                rolled AS (
                    SELECT minute_ns, sum(count) AS n FROM {ROLLUP_TABLE}
                    WHERE minute_ns IN (SELECT minute_ns FROM raw) GROUP BY ALL)
                SELECT raw.minute_ns FROM raw LEFT JOIN rolled USING (minute_ns)
                WHERE rolled.n IS DISTINCT FROM raw.n ORDER BY 1""",
            [cut_ns],
        ).fetchall()
    ]
    if redo:
        con.execute(
            f"DELETE FROM {ROLLUP_TABLE} WHERE minute_ns IN (SELECT unnest(?))", [redo]
        ).fetchall()
        con.execute(
            f"""INSERT INTO {ROLLUP_TABLE}
                SELECT series_id, {_MINUTE_SQL} AS minute_ns, count(*), sum(value), min(value),
                       max(value)
                FROM {RAW_TABLE} WHERE time_ns < ? AND {_MINUTE_SQL} IN (SELECT unnest(?))
                GROUP BY ALL ORDER BY series_id, minute_ns""",
            [cut_ns, redo],
        ).fetchall()
    row = con.execute(f"DELETE FROM {RAW_TABLE} WHERE time_ns < ?", [cut_ns]).fetchone()
    return (int(row[0]) if row else 0), len(redo)


def _expire_summaries(con: duckdb.DuckDBPyConnection, cut_ns: int) -> int:
    """Delete every summary table's rows of periods before ``cut_ns``: a
    period goes whole (its stored rows, partials, rebuilds and messages'
    records at once), so the view never shows half of one. The moments of a
    schema-1 lake (summary_partials) go with their messages."""
    deleted = 0
    has_partials = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE database_name = ? "
        "AND table_name = 'summary_partials'",
        [LAKE_ALIAS],
    ).fetchone()
    if has_partials and has_partials[0]:
        deleted += _count(
            con.execute(
                "DELETE FROM summary_partials WHERE msg_id IN "
                "(SELECT msg_id FROM summary_messages WHERE time_ns < ?)",
                [cut_ns],
            ).fetchone()
        )
    for table in SUMMARY_TABLES:
        deleted += _delete_before(con, table, "time_ns", cut_ns)
    return deleted


def _count(row: tuple[Any, ...] | None) -> int:
    return int(row[0]) if row else 0


def _delete_before(con: duckdb.DuckDBPyConnection, table: str, column: str, cut_ns: int) -> int:
    row = con.execute(f"DELETE FROM {table} WHERE {column} < ?", [cut_ns]).fetchone()
    return int(row[0]) if row else 0


def plan_for(
    con: duckdb.DuckDBPyConnection, lake: Path, reports: Path | None, now_ns: int
) -> tuple[RetentionPlan, TierBytes]:
    sizes = tier_bytes(con, lake, reports)
    fixed = sizes.other + sizes.catalog + sizes.digests  # what retention does not cut
    return plan_retention(live_files(con), read_policy(con), fixed, now_ns), sizes


def compact(
    lake: Path,
    reports: Path | None = None,
    now_ns: int | None = None,
    grace_s: float = DEFAULT_GRACE_S,
    settle_s: float = DEFAULT_SETTLE_S,
    summary_close_s: float = DEFAULT_CLOSE_S,
    memory_mib: int = DEFAULT_MEMORY_MIB,
) -> CompactReport:
    """One compaction of ``lake`` (see the module's docstring), DuckDB held
    to ``memory_mib`` (it spills to ``<lake>/spill`` beyond it)."""
    began = time.perf_counter()
    now_ns = time.time_ns() if now_ns is None else now_ns
    report = CompactReport(lake=str(lake), now_ns=now_ns, memory_limit_mib=memory_mib)
    stats = CommitStats()
    con = open_lake(lake, create=False)
    try:
        bound_memory(con, Path(lake), memory_mib)
        report.before = asdict(tier_bytes(con, lake, reports))
        # Before the flush: the rows it stores are inlined, and DuckLake 1.0
        # fails to rewrite a table's files while it holds inlined rows with
        # deletes ('isnan(VARCHAR)' reading the inlined aggregates).
        summaries = store_closed_summaries(con, now_ns, stats, summary_close_s)
        report.summary_periods_stored = summaries.periods_stored
        report.summary_rows_stored = summaries.rows_stored
        report.summary_partial_rows_deleted = summaries.partial_rows_deleted
        report.summary_late_periods_merged = summaries.late_periods_merged
        report.summary_periods_rebuilt = summaries.periods_rebuilt
        flushed = _call(con, f"CALL ducklake_flush_inlined_data('{LAKE_ALIAS}')", stats)
        report.flushed_tables = len(flushed)
        raw_files = [f for f in live_files(con) if f.table == RAW_TABLE]
        mins = [f.min_time_ns for f in raw_files if f.min_time_ns is not None]
        maxs = [f.max_time_ns for f in raw_files if f.max_time_ns is not None]
        report.rollup_rows_added = build_rollups(
            con,
            now_ns - int(settle_s * NS_PER_S),
            stats,
            (min(mins), max(maxs)) if mins and maxs else None,
        )
        plan, _sizes = plan_for(con, lake, reports, now_ns)
        report.plan = _plan_json(plan)
        report.over_budget_bytes = plan.over_budget_after_bytes
        for cut in plan.cuts:
            if cut.table == RAW_TABLE:
                deleted, redone = lake_commit(
                    con, functools.partial(_expire_raw, cut_ns=cut.cut_ns), stats
                )
                report.raw_rows_deleted += deleted
                report.rollup_minutes_redone += redone
            elif cut.table == SUMMARY_TIER:
                expire = functools.partial(_expire_summaries, cut_ns=cut.cut_ns)
                report.summary_rows_expired += lake_commit(con, expire, stats)
            else:
                drop = functools.partial(
                    _delete_before, table=ROLLUP_TABLE, column="minute_ns", cut_ns=cut.cut_ns
                )
                report.rollup_rows_deleted += lake_commit(con, drop, stats)
        # DuckLake 1.0 cannot rewrite a table's files while it holds
        # inlined rows beside deletes ('Failed to read inlined-data
        # aggregates', at COMMIT), and a collector inlines a small group's
        # rows at any time: a flush in a commit of its own left the rewrite
        # to meet the rows of the commits in between (test_lake_retention's
        # collector writing through a compaction: 12 retries failed alike).
        # Under one hold of the commit lock no writer comes between.
        _flushed, rewritten = lake_commits(con, [_flush, _rewrite], stats)
        report.files_rewritten = sum(int(r[2]) for r in rewritten)
        report.files_merged = _merge(con, stats)
        older = _older_than(grace_s)
        report.snapshots_expired = expire_snapshots(con, grace_s, stats)
        report.files_deleted, report.bytes_deleted = _cleanup(con, older, stats)
        report.orphans_deleted, report.orphan_bytes_deleted = delete_orphans(con, grace_s)
        pending = pending_deletion(con, lake)
        report.pending_files, report.pending_bytes = pending.files, pending.size_bytes
        after = tier_bytes(con, lake, reports)
        report.after = asdict(after)
        report.live_bytes_dropped = max(0, _live(report.before) - _live(report.after))
    finally:
        con.close()
    report.commit_retries = stats.retries
    report.seconds = time.perf_counter() - began
    report.peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return report


def bound_memory(con: duckdb.DuckDBPyConnection, lake: Path, memory_mib: int) -> None:
    """DuckDB's memory_limit for this connection, with a folder in the lake
    (the service's own state directory, which it may write) to spill to
    beyond it: the rollups' aggregation and the merges' sorts spill instead
    of growing until the collectors beside them are killed."""
    spill = lake / "spill"
    spill.mkdir(mode=0o700, exist_ok=True)
    con.execute(f"SET memory_limit = '{int(memory_mib)}MiB'").fetchall()
    con.execute("SET temp_directory = ?", [str(spill)]).fetchall()


MAX_MERGE_COMMITS = 10_000


def _merge(con: duckdb.DuckDBPyConnection, stats: CommitStats) -> int:
    """Merge adjacent small files, one output file (up to the target size)
    per commit: each commit holds the lake's commit lock (lake_commit), and
    collectors wait for one short merge, not for all of them."""
    merged = 0
    for _ in range(MAX_MERGE_COMMITS):
        rows = _call(
            con,
            f"CALL ducklake_merge_adjacent_files('{LAKE_ALIAS}', max_compacted_files => 1)",
            stats,
        )
        done = sum(int(r[2]) for r in rows)
        if done == 0:
            break
        merged += done
    return merged


def _live(sizes: dict[str, int]) -> int:
    return sizes["raw"] + sizes["rollups"] + sizes["summaries"] + sizes["other"]


# Snapshot ids expired per commit: expiring costs about 0.4 ms of CPU a
# snapshot (25,000 in 10.2 CPU-s, bench_lake_commits.py), all of it under
# the commit lock that the collectors wait for.
EXPIRE_CHUNK = 1000


def expire_snapshots(con: duckdb.DuckDBPyConnection, grace_s: float, stats: CommitStats) -> int:
    """Expire every snapshot older than ``grace_s`` but the newest; how many.

    By their ids, not by ``older_than``: DuckLake 1.0 with a SQLite catalog
    compares those times by their date only (:func:`_older_than`), so it
    kept every snapshot of the day before and of today, up to two days of
    commits, and a commit's CPU grows with the snapshots and the ended
    files' rows the catalog holds: 25 -> 68 -> 236 ms for a one-row commit
    and 54 -> 106 -> 180 ms for a 20,000-row group at 0, 100,000 and
    400,000 snapshots (bench_lake_commits.py --synthetic-snapshots,
    docs/store.md). The times are read from the catalog's own rows and
    compared here."""
    if grace_s <= 0:
        expired = _call(
            con,
            f"SELECT count(*) FROM ducklake_expire_snapshots('{LAKE_ALIAS}', "
            f"{_older_than(grace_s)})",
            stats,
        )
        return int(expired[0][0])
    rows = con.execute(
        f"SELECT snapshot_id, snapshot_time FROM {META}.ducklake_snapshot"
    ).fetchall()
    if len(rows) < 2:
        return 0
    newest = max(int(r[0]) for r in rows)
    cut_s = time.time() - grace_s
    old = sorted(int(sid) for sid, when in rows if int(sid) != newest and _epoch_s(when) < cut_s)
    total = 0
    for at in range(0, len(old), EXPIRE_CHUNK):
        ids = ", ".join(map(str, old[at : at + EXPIRE_CHUNK]))
        expired = _call(
            con,
            f"SELECT count(*) FROM ducklake_expire_snapshots('{LAKE_ALIAS}', versions => [{ids}])",
            stats,
        )
        total += int(expired[0][0])
    return total


def _epoch_s(when: object) -> float:
    """A catalog's snapshot time (text in SQLite, '2026-11-27 07:29:42.6+00')."""
    if isinstance(when, datetime):
        return when.timestamp()
    return datetime.fromisoformat(str(when)).timestamp()


def _older_than(grace_s: float) -> str:
    """The ``older_than`` argument that expires snapshots and deletes files
    only once they are more than ``grace_s`` old.

    DuckLake 1.0 with a SQLite catalog compares these times by their UTC date
    only (measured: a file scheduled at 21:44 is deleted for any older_than
    on the same day, even 'now() - 1 hour'; none for the day before). So the
    time given is the end of the day before the one holding now - grace:
    everything that goes is older than now - grace, and a file waits at most
    a day more than the grace. A grace of 0 (a lake no one reads) deletes all
    that is unreferenced at once.
    """
    if grace_s <= 0:
        return "older_than => now() + INTERVAL 1 DAY"
    limit_us = (time.time_ns() // 1000) - int(grace_s * 1e6)
    day_us = NS_PER_DAY // 1000
    last_us_of_day_before = limit_us - limit_us % day_us - 1
    return f"older_than => make_timestamptz({last_us_of_day_before})"


def _cleanup(con: duckdb.DuckDBPyConnection, older: str, stats: CommitStats) -> tuple[int, int]:
    """Delete the files unreferenced for longer than the grace period; their
    count and bytes (sized first: a dry run names them)."""
    names = con.execute(
        f"SELECT path FROM ducklake_cleanup_old_files('{LAKE_ALIAS}', dry_run => true, {older})"
    ).fetchall()
    size_bytes = 0
    for (name,) in names:
        with contextlib.suppress(FileNotFoundError):
            size_bytes += os.stat(name).st_size
    deleted = _call(
        con, f"SELECT path FROM ducklake_cleanup_old_files('{LAKE_ALIAS}', {older})", stats
    )
    return len(deleted), size_bytes


def _plan_json(plan: RetentionPlan) -> dict[str, Any]:
    return {
        "floor_ns": plan.floor_ns,
        "total_bytes": plan.total_bytes,
        "budget_bytes": plan.policy.budget_bytes,
        "cuts": [asdict(c) for c in plan.cuts],
        "freed_bytes_estimate": plan.freed_bytes,
        "over_budget_after_bytes": plan.over_budget_after_bytes,
    }
