"""Parquet files written into a lake's data folder before a transaction and
registered in it (``ducklake_add_data_files``): the collectors' way to keep
the encoding of a group out of the lake's commit lock.

A file is written whole (Arrow's Parquet writer, zstd) into the
folder DuckLake itself uses for the table, under a name no other writer can
pick (``hm-<uuid4>.parquet``); only the transaction that registers it makes
it part of the lake. Until then no reader sees it: readers list a table's
files from the catalog, never from the folder. A writer that dies between
the two leaves an *orphan* (on disk, in no snapshot): ``hushmon store
compact`` deletes orphans older than its grace period
(:func:`delete_orphans`), and a writer whose transaction failed deletes its
own files at once (:meth:`FileWriter.discard`).

Registered files are ordinary data files to DuckLake: merged, rewritten
after deletes, expired and deleted like the files its INSERT writes
(tests/python/test_lake_add_files.py).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hushmon.store.lake import DATA_NAME, LAKE_ALIAS

META = f"__ducklake_metadata_{LAKE_ALIAS}"
FILE_PREFIX = "hm-"

# zstd level of the files a collector writes. Compaction merges them into
# files written with the lake's own options (level 9, store/lake.py), so this
# decides the bytes of the newest hour or so only, and the collector's CPU
# (docs/transport.md, "The C hot path").
ADD_FILE_ZSTD_LEVEL = 1
# Dictionary pages for the columns a group repeats (a few thousand series
# ids, a few periods); a value column rarely repeats, and trying cost more
# than it saved (measured on a group of 2048 batches: 36 ms with every
# column tried, 22 ms without the values, at zstd level 3; level 1: 19 ms).
DICTIONARY_COLUMNS = ("series_id", "time_ns", "host", "job", "subject")


@dataclass(frozen=True)
class PendingFile:
    """A file written and not yet known to be registered."""

    table: str
    path: Path
    rows: int


class FileWriter:
    """Writes a table's rows as one Parquet file where DuckLake would put it."""

    def __init__(
        self, con: duckdb.DuckDBPyConnection, lake: Path, zstd_level: int = ADD_FILE_ZSTD_LEVEL
    ) -> None:
        self.con = con
        # Arrow's Parquet writer, not DuckDB's COPY: a group's samples (200,000
        # values) cost 13-16 ms of CPU against 23-31 with COPY on a connection
        # of its own, and its files came out 6 % smaller (dictionary pages for
        # the few distinct series ids and times of a group); a small table's
        # file costs well under COPY's 3-4 ms of fixed cost (measured with
        # bench/bench_collect.py, docs/transport.md "The C hot path").
        # the folder this connection attached as DATA_PATH (store/lake.py), not
        # the catalog's copy of it, which names where the lake was made
        self.data = Path(lake) / DATA_NAME
        self.zstd_level = int(zstd_level)
        self.row_group_rows = int(_option(con, "parquet_row_group_size") or 122_880)
        self._folders: dict[str, Path] = {}

    def folder(self, table: str) -> Path:
        """The table's data folder (``<data>/<schema path>/<table path>``)."""
        found = self._folders.get(table)
        if found is not None:
            return found
        row = self.con.execute(
            f"""SELECT s.path, s.path_is_relative, t.path, t.path_is_relative
                FROM {META}.ducklake_table t JOIN {META}.ducklake_schema s USING (schema_id)
                WHERE t.table_name = ? AND t.end_snapshot IS NULL AND s.end_snapshot IS NULL""",
            [table],
        ).fetchone()
        if row is None:
            raise duckdb.CatalogException(f"lake table {table} does not exist")
        schema = Path(row[0]) if not row[1] else self.data / row[0]
        folder = Path(row[2]) if not row[3] else schema / row[2]
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._folders[table] = folder
        return folder

    def write(self, table: str, rows: pa.Table, sort_by: tuple[str, ...] = ()) -> PendingFile:
        """One file of ``rows`` (their columns named as the table's) in the
        order of ``sort_by``: the C collector's groups come sorted (a check
        here, 1 us per batch), others are sorted with numpy's lexsort
        (11 us per batch)."""
        if sort_by and not _in_order(rows, sort_by):
            keys = [rows.column(c).to_numpy() for c in reversed(sort_by)]
            rows = rows.take(pa.array(np.lexsort(keys), pa.int64()))
        path = self.folder(table) / f"{FILE_PREFIX}{uuid.uuid4()}.parquet"
        try:
            pq.write_table(
                rows,
                path,
                row_group_size=self.row_group_rows,
                compression="zstd",
                compression_level=self.zstd_level,
                use_dictionary=[c for c in rows.column_names if c in DICTIONARY_COLUMNS],
            )
        except BaseException:
            with contextlib.suppress(OSError):
                path.unlink()
            raise
        return PendingFile(table, path, rows.num_rows)

    def close(self) -> None:
        """Nothing to release (kept so a writer's close reads the same)."""

    def discard(self, files: list[PendingFile]) -> None:
        """Deletes the files the catalog does not name (a failed or
        rolled-back transaction, or one that stored its rows another way);
        best effort: what is left is an orphan for compaction."""
        for f in files:
            with contextlib.suppress(duckdb.Error, OSError):
                if not registered(self.con, f):
                    f.path.unlink(missing_ok=True)


def register(con: duckdb.DuckDBPyConnection, files: list[PendingFile]) -> None:
    """Inside the caller's transaction: the files become the tables' data
    (one statement per file, sent in one call)."""
    calls = []
    for f in files:
        quoted = str(f.path).replace("'", "''")
        calls.append(f"CALL ducklake_add_data_files('{LAKE_ALIAS}', '{f.table}', '{quoted}');")
    if calls:
        con.execute("\n".join(calls)).fetchall()


def registered(con: duckdb.DuckDBPyConnection, f: PendingFile) -> bool:
    """Whether any snapshot's catalog names the file (relative to its table's
    folder, as DuckLake stores a file added inside it, or absolute)."""
    row = con.execute(
        f"SELECT count(*) FROM {META}.ducklake_data_file WHERE path IN (?, ?)",
        [f.path.name, str(f.path)],
    ).fetchone()
    return bool(row and row[0])


def delete_orphans(con: duckdb.DuckDBPyConnection, grace_s: float) -> tuple[int, int]:
    """Deletes the files under the lake's data folder that no snapshot names
    and that were last written more than ``grace_s`` ago (a writer between
    its file and its commit is younger than that); ``grace_s <= 0`` deletes
    every orphan (a lake no one writes). Returns (files, bytes)."""
    when = (
        "cleanup_all => true"
        if grace_s <= 0
        else f"older_than => now() - to_microseconds({int(grace_s * 1e6)})"
    )
    found = con.execute(
        f"SELECT path FROM ducklake_delete_orphaned_files('{LAKE_ALIAS}', dry_run => true, {when})"
    ).fetchall()
    size_bytes = 0
    for (name,) in found:
        with contextlib.suppress(OSError):
            size_bytes += os.stat(name).st_size
    deleted = con.execute(
        f"SELECT path FROM ducklake_delete_orphaned_files('{LAKE_ALIAS}', {when})"
    ).fetchall()
    return len(deleted), size_bytes


def _in_order(rows: pa.Table, keys: tuple[str, ...]) -> bool:
    """Whether the rows are in ascending order of ``keys`` (integer columns)."""
    if rows.num_rows < 2:
        return True
    cols = [rows.column(k).to_numpy() for k in keys]
    # a row is out of order when some key drops while all before it are equal
    equal = np.ones(rows.num_rows - 1, dtype=bool)
    for col in cols:
        before, after = col[:-1], col[1:]
        if np.any(equal & (after < before)):
            return False
        equal &= after == before
    return True


def _option(con: duckdb.DuckDBPyConnection, name: str) -> str | None:
    row = con.execute(
        f"SELECT value FROM {META}.ducklake_metadata WHERE key = ? AND scope IS NULL", [name]
    ).fetchone()
    return str(row[0]) if row else None
