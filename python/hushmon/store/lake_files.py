"""What a lake holds on disk, read from its catalog: the live data files of
each table with their sizes and time ranges, and the files waiting for
deletion. Retention plans with it and ``hushmon store status`` shows it;
nothing here reads a Parquet file.

DuckLake's catalog tables are read through the attached metadata database
(``__ducklake_metadata_<alias>``): ``ducklake_data_file`` (one row per data
file, ``end_snapshot`` NULL while a current snapshot uses it),
``ducklake_delete_file`` (rows deleted from a data file), and
``ducklake_file_column_stats`` (each file's min/max per column, written with
the file).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

import duckdb

from hushmon.store.lake import CATALOG_NAME, DATA_NAME, LAKE_ALIAS

META = f"__ducklake_metadata_{LAKE_ALIAS}"
RAW_TABLE = "samples"
ROLLUP_TABLE = "samples_1m"
# The job summaries and rack partials (and their messages' records): what
# the digest is built from, kept as long as the rollups (lake_retention.py).
# summary_partials and summary_sources hold rows of schema 1-2 lakes only.
SUMMARY_TABLES = (
    "summary_rows",
    "job_summaries",
    "summary_rebuilt",
    "summary_messages",
    "summary_sources",
)
# The column whose min/max says how old a file's rows are, per table.
TIME_COLUMNS = {
    RAW_TABLE: "time_ns",
    ROLLUP_TABLE: "minute_ns",
    **{t: "time_ns" for t in SUMMARY_TABLES},
}


@dataclass(frozen=True)
class DataFile:
    table: str
    data_file_id: int
    path: str
    size_bytes: int  # the data file and its delete files
    rows: int  # rows written, before deletes
    deleted_rows: int
    min_time_ns: int | None  # None where the table has no time column
    max_time_ns: int | None


def live_files(con: duckdb.DuckDBPyConnection) -> list[DataFile]:
    """Every data file the current snapshot reads, oldest rows first."""
    rows = con.execute(
        f"""
        WITH tables AS (
            SELECT table_id, table_name FROM {META}.ducklake_table WHERE end_snapshot IS NULL),
        deletes AS (
            SELECT data_file_id, sum(file_size_bytes) AS bytes, sum(delete_count) AS n
            FROM {META}.ducklake_delete_file WHERE end_snapshot IS NULL GROUP BY data_file_id),
        time_columns AS (
            SELECT c.table_id, c.column_id
            FROM {META}.ducklake_column c JOIN tables t USING (table_id)
            WHERE c.end_snapshot IS NULL
              AND (t.table_name, c.column_name) IN (SELECT unnest(?), unnest(?)))
        SELECT t.table_name, f.data_file_id, f.path, f.file_size_bytes + coalesce(d.bytes, 0),
               f.record_count, coalesce(d.n, 0), s.min_value, s.max_value
        FROM {META}.ducklake_data_file f
        JOIN tables t USING (table_id)
        LEFT JOIN deletes d USING (data_file_id)
        LEFT JOIN time_columns tc ON tc.table_id = f.table_id
        LEFT JOIN {META}.ducklake_file_column_stats s
            ON s.data_file_id = f.data_file_id AND s.column_id = tc.column_id
        WHERE f.end_snapshot IS NULL
        ORDER BY t.table_name, try_cast(s.min_value AS BIGINT) NULLS LAST, f.data_file_id
        """,
        [list(TIME_COLUMNS), list(TIME_COLUMNS.values())],
    ).fetchall()
    return [
        DataFile(
            table=str(r[0]),
            data_file_id=int(r[1]),
            path=str(r[2]),
            size_bytes=int(r[3]),
            rows=int(r[4]),
            deleted_rows=int(r[5]),
            min_time_ns=int(r[6]) if r[6] is not None else None,
            max_time_ns=int(r[7]) if r[7] is not None else None,
        )
        for r in rows
    ]


@dataclass(frozen=True)
class Pending:
    """Files no current snapshot reads, kept until their grace period ends."""

    files: int
    size_bytes: int
    oldest_scheduled: str | None  # when the oldest was scheduled (UTC text)


def pending_deletion(con: duckdb.DuckDBPyConnection, lake: Path) -> Pending:
    rows = con.execute(
        # schedule_start is text in a SQLite catalog ('2026-11-26 21:36:34.86+00')
        f"""SELECT path, path_is_relative, left(schedule_start::VARCHAR, 19)
            FROM {META}.ducklake_files_scheduled_for_deletion ORDER BY schedule_start::VARCHAR"""
    ).fetchall()
    size_bytes = 0
    for path, relative, _when in rows:
        full = lake / DATA_NAME / path if relative else Path(path)
        try:
            size_bytes += os.stat(full).st_size
        except FileNotFoundError:
            continue  # already removed by another compaction
    return Pending(len(rows), size_bytes, str(rows[0][2]) if rows else None)


def catalog_bytes(lake: Path) -> int:
    """The SQLite catalog with its write-ahead log (inlined rows live there)."""
    total = 0
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            total += os.stat(lake / (CATALOG_NAME + suffix)).st_size
    return total


def folder_bytes(folder: Path) -> int:
    """Bytes of the files under ``folder`` (0 when it does not exist)."""
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except FileNotFoundError:
                continue
    return total
