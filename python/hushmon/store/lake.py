"""The cluster store: a DuckLake -- Parquet data files plus a SQLite catalog --
that several collectors write while digest, compare, serve, status and a
user's own DuckDB session read (docs/store.md, "The cluster store").

A lake is a folder ``NAME.lake`` holding ``catalog.sqlite`` (DuckLake's
metadata: tables, snapshots, the list of data files) and ``data/`` (the
Parquet files, immutable once written). Opening it gives a DuckDB connection
whose default catalog is the lake, so the same table names (``series``,
``samples``, ``job_activity``, ``jobs``, ``transport_*``, ``job_summaries``)
and the same SQL serve both stores.

What differs from the embedded DuckDB file (schema.py):

- No primary keys or unique constraints (DuckLake has none). Writers
  deduplicate before they append; ``series`` may hold the same row twice
  when two collectors met a new series at once, so readers see it through
  the view ``series`` (one row per id) over the table ``series_rows``.
- ``series_id`` is a BIGINT computed from the series key (:func:`series_id_of`),
  not a counter: collectors that never talk to each other name a series alike.
- The extensions come from the ``duckdb-extension-*`` wheels (pyproject), so
  nothing is downloaded at run time.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import random
import sqlite3
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import duckdb

from hushmon.datadir import drop_world_access
from hushmon.errors import HushmonError
from hushmon.store import duckdb_heap
from hushmon.store.summary_view import SKETCH_COLUMNS, SOURCE_LIST
from hushmon.store.summary_view import VIEWS as SUMMARY_VIEWS

# 1: the collector's tables; 2: samples_1m (rollups), lake_policy (retention),
# samples sorted by (series_id, time_ns); 3: summary_rows, summary_rebuilt and
# summary_messages.source_list, appended only, the rack partials merged when
# read by the view merged_summaries (summary_view.py); 4:
# summary_messages.source_hashes (a message's sources as one BLOB of hashes).
LAKE_SCHEMA_VERSION = 4
LAKE_SUFFIX = ".lake"
CATALOG_NAME = "catalog.sqlite"
DATA_NAME = "data"
# The attached lake's name in a connection (``USE``d, so SQL names need no prefix).
LAKE_ALIAS = "lake"

_EXTENSIONS = ("duckdb_extension_sqlite_scanner", "duckdb_extension_ducklake")

_SUMMARY_MOMENTS = """
        measurement VARCHAR, tags VARCHAR, field VARCHAR,
        count BIGINT, sum DOUBLE, mean DOUBLE, m2 DOUBLE, min DOUBLE, max DOUBLE,
        sketch VARCHAR"""

# Since schema 3, the sketch as columns (summary_view.SKETCH_COLUMNS).
_SUMMARY_ROW = f"""
        measurement VARCHAR, tags VARCHAR, field VARCHAR,
        count BIGINT, sum DOUBLE, mean DOUBLE, m2 DOUBLE, min DOUBLE, max DOUBLE,
        {SKETCH_COLUMNS}"""

# The embedded store's tables (schema.py) without constraints; series ids are
# 64-bit key hashes. Every statement is CREATE ... IF NOT EXISTS.
_TABLES = (
    "CREATE TABLE IF NOT EXISTS hushmon_schema (version INTEGER, created_at TIMESTAMP)",
    """CREATE TABLE IF NOT EXISTS series_rows (
        series_id BIGINT, host VARCHAR, measurement VARCHAR, tags VARCHAR, field VARCHAR)""",
    "CREATE TABLE IF NOT EXISTS samples (series_id BIGINT, time_ns BIGINT, value DOUBLE)",
    "CREATE TABLE IF NOT EXISTS job_activity (job VARCHAR, host VARCHAR, time_ns BIGINT)",
    """CREATE TABLE IF NOT EXISTS spool_files (
        name VARCHAR, content_hash VARCHAR, size_bytes BIGINT, lines BIGINT,
        ingested_at TIMESTAMP)""",
    """CREATE TABLE IF NOT EXISTS transport_batches (
        host VARCHAR, epoch BIGINT, seq BIGINT, lines BIGINT, period_ns BIGINT,
        dropped BIGINT, replay BOOLEAN, subject VARCHAR, stream_seq BIGINT,
        received_at TIMESTAMP)""",
    """CREATE TABLE IF NOT EXISTS transport_events (
        seen_at TIMESTAMP, kind VARCHAR, host VARCHAR, subject VARCHAR, epoch BIGINT,
        seq BIGINT, count BIGINT, reason VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS summary_messages (
        msg_id VARCHAR, subject VARCHAR, level VARCHAR, rack VARCHAR, job VARCHAR,
        time_ns BIGINT, sources BIGINT, overlapped BOOLEAN, received_at TIMESTAMP)""",
    """CREATE TABLE IF NOT EXISTS summary_sources (
        msg_id VARCHAR, level VARCHAR, job VARCHAR, time_ns BIGINT, host VARCHAR,
        epoch BIGINT, seq BIGINT)""",
    f"CREATE TABLE IF NOT EXISTS summary_partials (msg_id VARCHAR,{_SUMMARY_MOMENTS})",
    f"""CREATE TABLE IF NOT EXISTS job_summaries (
        job VARCHAR, time_ns BIGINT,{_SUMMARY_MOMENTS}, origin VARCHAR)""",
    # Schema 3: the collector appends only. Each summary message's rows as
    # sent, with its level and (job, period) so a reader's filter prunes
    # files; the rack partials are merged when read (merged_summaries).
    f"""CREATE TABLE IF NOT EXISTS summary_rows (
        msg_id VARCHAR, level VARCHAR, job VARCHAR, time_ns BIGINT,{_SUMMARY_ROW})""",
    # A (job, period) rebuilt from raw data, a new set of rows each time.
    f"""CREATE TABLE IF NOT EXISTS summary_rebuilt (
        job VARCHAR, time_ns BIGINT, built_ns BIGINT,{_SUMMARY_ROW})""",
    # A message's source batches in its own row (summary_sources: before 3).
    f"ALTER TABLE summary_messages ADD COLUMN IF NOT EXISTS source_list {SOURCE_LIST}",
    # Schema 4: the sources as sorted 64-bit hashes in one BLOB
    # (transport/source_hashes.py); source_list stays for rows written before.
    "ALTER TABLE summary_messages ADD COLUMN IF NOT EXISTS source_hashes BLOB",
    # Per series and minute, what a per-node mean/min/max per minute needs once
    # the raw samples have expired (lake_compact.py builds it).
    """CREATE TABLE IF NOT EXISTS samples_1m (
        series_id BIGINT, minute_ns BIGINT, count BIGINT, sum DOUBLE, min DOUBLE, max DOUBLE)""",
    # The retention policy: the newest row holds (lake_retention.py).
    """CREATE TABLE IF NOT EXISTS lake_policy (
        raw_days DOUBLE, rollup_days DOUBLE, budget_bytes BIGINT, min_raw_hours DOUBLE,
        set_at TIMESTAMP)""",
    # Within each Parquet file a series' values lie together in time order:
    # a series' values repeat or differ little, so the dictionary and zstd
    # shrink them (sorted by time then series instead: 3.2 bytes per value
    # against 2.1, bench/bench_store_bytes.py), and a one-series query reads
    # one stretch of each file. DuckLake 1.0 sorts on insert, on compaction
    # and when it flushes inlined rows.
    "ALTER TABLE samples SET SORTED BY (series_id ASC, time_ns ASC)",
    "ALTER TABLE samples_1m SET SORTED BY (series_id ASC, minute_ns ASC)",
)

# Stored in the catalog (every writer and compaction uses them), set when the
# lake is made. bench/bench_store_bytes.py, 32 nodes x 3600 s of the agent's
# field set (docs/store.md has the table): zstd 9 with Parquet v1 pages and
# row groups of 256k rows 1.46 bytes per value; DuckDB's 122,880-row groups
# 1.63, 1M 1.53, 4M 1.82 (the value column's dictionary stops paying); zstd
# 3 1.69, zstd 19 1.53 at 3.5x the write time (both at 122,880 rows);
# Parquet v2 pages 2.11 (v2 picks BYTE_STREAM_SPLIT for the doubles where
# v1's dictionary wins). DuckLake 1.0 cannot unset an option: with a level
# set, a codec other than zstd is refused (docs/store.md says so).
_OPTIONS: tuple[tuple[str, str | int], ...] = (
    ("parquet_compression", "zstd"),
    ("parquet_compression_level", 9),
    ("parquet_row_group_size", 262_144),
    # A group of ~2048 agent batches is ~200,000 values: a file each, merged by
    # compaction up to this size (large enough that a day of a big cluster is
    # hundreds of files, not millions; small enough that retention drops old
    # data a file at a time without rewriting much).
    ("target_file_size", "256MB"),
)

_VIEWS = (
    """CREATE OR REPLACE VIEW series AS
        SELECT DISTINCT ON (series_id) series_id, host, measurement, tags, field
        FROM series_rows""",
    """CREATE OR REPLACE VIEW jobs AS
        SELECT job, count(DISTINCT host) AS nodes, min(time_ns) AS start_ns,
               max(time_ns) AS end_ns, count(*) AS node_periods
        FROM job_activity GROUP BY job""",
    *SUMMARY_VIEWS,
)

_FNV64_OFFSET = 0xCBF29CE484222325
_FNV64_PRIME = 0x100000001B3
_MASK64 = (1 << 64) - 1


def series_id_of(host: str, measurement: str, tags: str, field: str) -> int:
    """A series' id in the lake: FNV-1a 64 of ``host\\x1fmeasurement\\x1ftags\\x1ffield``
    (UTF-8), top bit cleared so it fits a signed BIGINT. The C collector computes
    the same (c/transport); docs/store.md states it."""
    h = _FNV64_OFFSET
    for byte in "\x1f".join((host, measurement, tags, field)).encode():
        h = ((h ^ byte) * _FNV64_PRIME) & _MASK64
    return h & 0x7FFF_FFFF_FFFF_FFFF


def is_lake(path: Path) -> bool:
    """A lake is named ``*.lake`` or is a folder holding a DuckLake catalog."""
    path = Path(path)
    return path.suffix == LAKE_SUFFIX or (path / CATALOG_NAME).exists()


def _extension_file(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise HushmonError(
            f"python package {module.replace('_', '-')} is missing: run 'make' "
            "(it installs the DuckDB extensions the cluster store needs)"
        )
    root = Path(next(iter(spec.submodule_search_locations)))
    version = duckdb.__version__
    found = sorted(root.glob(f"extensions/v{version}/*.duckdb_extension"))
    if not found:
        raise HushmonError(
            f"{module.replace('_', '-')} has no build for DuckDB {version}: "
            "reinstall with 'make' (pyproject.toml pins them together)"
        )
    return found[0]


def load_extensions(con: duckdb.DuckDBPyConnection) -> None:
    for module in _EXTENSIONS:
        con.execute(f"LOAD '{_extension_file(module)}'").fetchall()


# DuckLake retries a commit that met another writer's commit by itself
# (re-reading the catalog): 10 tries 100 ms apart by default, which two
# collectors committing ~200,000-value groups exhaust under load. More tries,
# shorter first wait: commits are short, and a writer waiting long holds its
# NATS messages unacked.
_SESSION_SETTINGS = (
    "SET enable_progress_bar = false",
    # Small appends (a few events or summary rows per group) go into the
    # SQLite catalog instead of a tiny Parquet file each; compaction flushes
    # them to Parquet. Above this, rows go to a file at once. A session
    # setting, not the lake's stored option: DuckDB 1.5.5 crashes (SIGSEGV)
    # setting data_inlining_row_limit on a lake that holds inlined rows.
    "SET ducklake_default_data_inlining_row_limit = 100",
    "SET ducklake_max_retry_count = 40",
    "SET ducklake_retry_wait_ms = 20",
    "SET ducklake_retry_backoff = 1.5",
)

# What a second process touching the catalog at the same moment may raise:
# SQLite's lock ("database is locked", "busy"), DuckLake's write-write conflict
# after its own retries, or a catalog another process is creating this instant.
_TRANSIENT = (
    "database is locked",
    "database is busy",
    "sqlite_busy",
    "failed to commit",
    "failed to flush",
    "conflict",
    "already exists",
    "another transaction",
)


def is_transient(exc: BaseException) -> bool:
    """True for the errors another writer of the same lake can cause, which
    go away when the transaction is run again."""
    text = str(exc).lower()
    return isinstance(exc, duckdb.Error) and any(t in text for t in _TRANSIENT)


@dataclass
class CommitStats:
    """What :func:`lake_commit` had to do (a bench or a collector sums it)."""

    commits: int = 0
    retries: int = 0
    waited_s: float = 0.0
    # the commit lock held, acquiring to releasing (what the lake's other
    # writers could not have), over every attempt
    held_s: float = 0.0
    # what was retried: the first 160 characters of each error
    errors: dict[str, int] = field(default_factory=dict)


T = TypeVar("T")

COMMIT_ATTEMPTS = 12
_FIRST_WAIT_S = 0.02
_MAX_WAIT_S = 2.0


def _backoff_s(attempt: int) -> float:
    # Exponential with full jitter, so two writers that collided do not
    # collide again in step.
    return random.uniform(0, min(_MAX_WAIT_S, _FIRST_WAIT_S * 2**attempt))


def lake_commit(
    con: duckdb.DuckDBPyConnection,
    body: Callable[[duckdb.DuckDBPyConnection], T],
    stats: CommitStats | None = None,
    attempts: int = COMMIT_ATTEMPTS,
) -> T:
    """Run ``body(con)`` in one write transaction and commit it; when another
    process's commit or lock gets in the way, roll back and run it again (up
    to ``attempts`` times, waits growing from 20 ms to 2 s). ``body`` must be
    safe to repeat: it runs in a fresh transaction each time, so it should
    decide what to write from what it reads there. Other errors are raised at
    once; the last transient one after ``attempts`` as a HushmonError.

    The transaction runs under an exclusive lock on ``commit.lock`` in the
    lake's folder, so the writers of one lake take turns. Measured
    (bench_lake_commits, two writers of 200,000-value groups and a reader,
    load 8): without it, a writer lost "Failed to flush changes into
    DuckLake: database is locked" 12 times in a row and failed (SQLite
    refuses a commit from a connection whose read snapshot another commit
    made stale; DuckLake neither waits nor retries that, and a retried group
    was stale again by the time it was encoded); with the lock around COMMIT
    only, 7-9 retries and 0.54-0.64 of one writer's rate; around the whole
    transaction, 0 retries and 0.85 (two processes on two busy cores). The
    kernel drops the lock of a process that dies. Long operations (merging
    files, rollups) are cut into short commits by their callers, so that
    collectors wait at most one of them. Not re-entrant: ``body`` must not
    call lake_commit (the second lock would wait for the first forever).
    """
    result: T = lake_commits(con, [body], stats, attempts)[0]
    return result


def lake_commits(
    con: duckdb.DuckDBPyConnection,
    bodies: Sequence[Callable[[duckdb.DuckDBPyConnection], Any]],
    stats: CommitStats | None = None,
    attempts: int = COMMIT_ATTEMPTS,
) -> list[Any]:
    """Each of ``bodies`` in a transaction of its own, one after the other,
    under one hold of the commit lock, so that no other writer of the lake
    commits between them (DuckLake will not run some steps in one
    transaction: "Transactions can either make changes OR perform
    compaction - not both"); retried as a whole as :func:`lake_commit` is,
    so every body must be safe to repeat. Their results, in order."""
    last: BaseException | None = None
    lock = _commit_lock_path(con)
    for attempt in range(attempts):
        results: list[Any] = []
        try:
            with _locked(lock):
                locked_at = time.perf_counter()
                try:
                    for body in bodies:
                        con.execute("BEGIN TRANSACTION").fetchall()
                        results.append(body(con))
                        con.execute("COMMIT").fetchall()
                finally:
                    if stats is not None:
                        stats.held_s += time.perf_counter() - locked_at
        except duckdb.Error as exc:
            # A failed COMMIT may have left no transaction to roll back.
            with contextlib.suppress(duckdb.Error):
                con.execute("ROLLBACK").fetchall()
            if not is_transient(exc):
                raise
            last = exc
            wait_s = _backoff_s(attempt)
            if stats is not None:
                stats.retries += 1
                stats.waited_s += wait_s
                what = " ".join(str(exc).split())[:160]
                stats.errors[what] = stats.errors.get(what, 0) + 1
            time.sleep(wait_s)
            continue
        if stats is not None:
            stats.commits += len(bodies)
        return results
    assert last is not None
    raise HushmonError(
        f"lake commit failed {attempts} times, other writers kept the catalog busy: "
        f"{str(last).splitlines()[0]}"
    ) from last


COMMIT_LOCK_NAME = "commit.lock"


# A lake connection's lock path, asked once: the query cost a collector
# 4-5 ms of CPU per commit (bench/bench_collect.py, docs/transport.md).
_LOCK_PATHS: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, Path] = (
    weakref.WeakKeyDictionary()
)


def _commit_lock_path(con: duckdb.DuckDBPyConnection) -> Path | None:
    """``<lake>/commit.lock`` for a connection made by :func:`_attach` (the
    catalog's folder); None for any other connection."""
    known = _LOCK_PATHS.get(con)
    if known is not None:
        return known
    path = _ask_lock_path(con)
    if path is not None:  # a plain connection may attach a lake later
        _LOCK_PATHS[con] = path
    return path


def _ask_lock_path(con: duckdb.DuckDBPyConnection) -> Path | None:
    row = con.execute(
        "SELECT path FROM duckdb_databases() WHERE database_name = ? AND type = 'ducklake'",
        [LAKE_ALIAS],
    ).fetchone()
    prefix = "sqlite:"
    if row is None or not str(row[0] or "").startswith(prefix):
        return None
    return Path(str(row[0])[len(prefix) :]).parent / COMMIT_LOCK_NAME


@contextlib.contextmanager
def _locked(path: Path | None) -> Iterator[None]:
    if path is None:
        yield
        return
    # The kernel drops the lock when its holder dies: a killed collector
    # never blocks the others.
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _attach(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    catalog = path / CATALOG_NAME
    options = [f"DATA_PATH '{path / DATA_NAME}/'"]
    if read_only:
        options.append("READ_ONLY")
    quoted = str(catalog).replace("'", "''")
    # Two collectors starting on a fresh folder both create the catalog's
    # tables: the loser sees "already exists" or a locked SQLite file and
    # attaches again once the winner is done.
    for attempt in range(COMMIT_ATTEMPTS):
        con = duckdb.connect()
        # before the extensions load: their allocators read it as they start
        duckdb_heap.purge_freed_pages(con)
        load_extensions(con)  # before the settings: they belong to the extension
        for setting in _SESSION_SETTINGS:
            con.execute(setting).fetchall()
        try:
            con.execute(
                f"ATTACH 'ducklake:sqlite:{quoted}' AS {LAKE_ALIAS} ({', '.join(options)})"
            ).fetchall()
            con.execute(f"USE {LAKE_ALIAS}").fetchall()
            return con
        except duckdb.Error as exc:
            con.close()
            if not is_transient(exc) or attempt == COMMIT_ATTEMPTS - 1:
                raise HushmonError(f"cannot open lake {path}: {str(exc).splitlines()[0]}") from exc
            time.sleep(_backoff_s(attempt))
    raise AssertionError("unreachable")


def _lake_version(con: duckdb.DuckDBPyConnection) -> int | None:
    tables = {
        r[0]
        for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = ?", [LAKE_ALIAS]
        ).fetchall()
    }
    if "hushmon_schema" not in tables:
        return None
    row = con.execute("SELECT max(version) FROM hushmon_schema").fetchone()
    return int(row[0]) if row and row[0] is not None else None


def _check_version(con: duckdb.DuckDBPyConnection, path: Path) -> int | None:
    version = _lake_version(con)
    if version is not None and version > LAKE_SCHEMA_VERSION:
        con.close()
        raise HushmonError(
            f"{path} has lake schema version {version}, newer than this hushmon's "
            f"({LAKE_SCHEMA_VERSION}); upgrade hushmon to read it (nothing was changed)"
        )
    return version


def open_lake(path: Path, create: bool = True) -> duckdb.DuckDBPyConnection:
    """Open (and if needed create) the lake for writing. Several processes may."""
    path = Path(path)
    if not (path / CATALOG_NAME).exists():
        if not create:
            raise HushmonError(f"store {path} does not exist: run 'hushmon collect' first")
        if path.exists() and not path.is_dir():
            raise HushmonError(f"{path} is not a folder: a lake store is a folder")
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        (path / DATA_NAME).mkdir(mode=0o700, exist_ok=True)
    _wal_catalog(path / CATALOG_NAME)
    con = _attach(path, read_only=False)
    drop_world_access(path / CATALOG_NAME)
    if (_check_version(con, path) or 0) < LAKE_SCHEMA_VERSION:
        try:
            # The options in a transaction of their own (setting them twice,
            # two processes at once, is harmless).
            lake_commit(con, _set_options)
            lake_commit(con, lambda c: _create_or_migrate(c, path))
        except BaseException:
            con.close()
            raise
    return con


def _set_options(con: duckdb.DuckDBPyConnection) -> None:
    for name, value in _OPTIONS:
        con.execute(f"CALL {LAKE_ALIAS}.set_option(?, ?)", [name, value]).fetchall()


def _wal_catalog(catalog: Path) -> None:
    """Put the SQLite catalog in write-ahead-log mode (it stays so in the file).

    In SQLite's default rollback mode a reader's snapshot read holds a lock
    that makes every writer's commit wait or fail "database is locked"; in WAL
    mode readers never block the writer. bench/bench_lake_commits.py: two
    writers of 200,000-value groups with a reader counting, 1.0 commit/s in
    rollback mode against 4.8 in WAL mode. WAL needs the processes on one
    machine (shared memory), which a SQLite catalog needs anyway. Best effort:
    a catalog busy at this instant is switched by the next writer to open it.
    """
    with (
        contextlib.suppress(sqlite3.Error),
        contextlib.closing(sqlite3.connect(catalog, timeout=1.0)) as db,
    ):
        if db.execute("PRAGMA journal_mode").fetchone() != ("wal",):
            db.execute("PRAGMA journal_mode=WAL").fetchall()


def _create_or_migrate(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Inside one transaction: every table and view, unless another
    process did it first (this runs again after a conflict, and then finds
    the version it wrote)."""
    version = _check_version(con, path) or 0
    if version >= LAKE_SCHEMA_VERSION:
        return
    for statement in _TABLES:
        con.execute(statement).fetchall()
    con.execute(
        "INSERT INTO hushmon_schema VALUES (?, current_timestamp)", [LAKE_SCHEMA_VERSION]
    ).fetchall()
    for statement in _VIEWS:
        con.execute(statement).fetchall()


def open_lake_readonly(path: Path) -> duckdb.DuckDBPyConnection:
    """Open an existing lake for reading; collectors may go on writing meanwhile."""
    path = Path(path)
    if not (path / CATALOG_NAME).exists():
        raise HushmonError(f"store {path} does not exist: run 'hushmon collect' first")
    con = _attach(path, read_only=True)
    if _check_version(con, path) is None:
        con.close()
        raise HushmonError(f"{path} is an empty lake, not a hushmon store")
    return con
