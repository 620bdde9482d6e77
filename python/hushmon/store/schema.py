"""The store's DuckDB schema, its version, and opening a database safely.

Opening never changes a database it cannot understand: a file written by a
newer hushmon (higher schema version) or a DuckDB file that is not a hushmon
store is refused before anything is written. docs/store.md describes the
tables; change both together and raise SCHEMA_VERSION.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from hushmon.datadir import drop_world_access
from hushmon.errors import HushmonError
from hushmon.store import duckdb_heap
from hushmon.store.lake import is_lake, open_lake, open_lake_readonly
from hushmon.store.summary_view import SKETCH_COLUMNS, SOURCE_LIST
from hushmon.store.summary_view import VIEWS as SUMMARY_VIEWS
from hushmon.store.transaction import in_transaction

SCHEMA_VERSION = 4

# A sensor's moments in one period (hushmon.transport.summary.Summary):
# the reducers' partials and the store's job-wide summaries both hold them.
_SUMMARY_MOMENTS = """
        measurement VARCHAR NOT NULL,
        tags VARCHAR NOT NULL,
        field VARCHAR NOT NULL,
        count BIGINT NOT NULL,
        sum DOUBLE NOT NULL,
        mean DOUBLE NOT NULL,
        m2 DOUBLE NOT NULL,
        min DOUBLE NOT NULL,
        max DOUBLE NOT NULL,
        sketch VARCHAR NOT NULL"""

# Since version 3, the sketch as columns (summary_view.SKETCH_COLUMNS).
_SUMMARY_ROW = f"""
        measurement VARCHAR NOT NULL,
        tags VARCHAR NOT NULL,
        field VARCHAR NOT NULL,
        count BIGINT NOT NULL,
        sum DOUBLE NOT NULL,
        mean DOUBLE NOT NULL,
        m2 DOUBLE NOT NULL,
        min DOUBLE NOT NULL,
        max DOUBLE NOT NULL,
        {SKETCH_COLUMNS}"""

# One statement per table. Samples have no primary key on purpose: an ART
# index over ~10^8 rows costs gigabytes; ingest deduplicates by an anti-join
# on (series_id, time_ns) restricted to the batch's time range instead.
_TABLES = (
    """CREATE TABLE IF NOT EXISTS hushmon_schema (
        version INTEGER NOT NULL,
        created_at TIMESTAMP NOT NULL DEFAULT current_timestamp)""",
    """CREATE TABLE IF NOT EXISTS series (
        series_id INTEGER PRIMARY KEY,
        host VARCHAR NOT NULL,
        measurement VARCHAR NOT NULL,
        tags VARCHAR NOT NULL,
        field VARCHAR NOT NULL,
        UNIQUE (host, measurement, tags, field))""",
    """CREATE TABLE IF NOT EXISTS samples (
        series_id INTEGER NOT NULL,
        time_ns BIGINT NOT NULL,
        value DOUBLE NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS job_activity (
        job VARCHAR NOT NULL,
        host VARCHAR NOT NULL,
        time_ns BIGINT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS spool_files (
        name VARCHAR NOT NULL,
        content_hash VARCHAR NOT NULL,
        size_bytes BIGINT NOT NULL,
        lines BIGINT NOT NULL,
        ingested_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
        PRIMARY KEY (name, content_hash))""",
    # Version 2: the online transport (hushmon collect, docs/transport.md).
    # One row per raw batch stored; (host, epoch, seq) is the batch's identity.
    """CREATE TABLE IF NOT EXISTS transport_batches (
        host VARCHAR NOT NULL,
        epoch BIGINT NOT NULL,
        seq BIGINT NOT NULL,
        lines BIGINT NOT NULL,
        period_ns BIGINT,
        dropped BIGINT NOT NULL,
        replay BOOLEAN NOT NULL,
        subject VARCHAR NOT NULL,
        stream_seq BIGINT NOT NULL,
        received_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
        PRIMARY KEY (host, epoch, seq))""",
    # What the collector saw and did not store as data: duplicates, rejected
    # messages, malformed lines, redeliveries, overlapping summaries.
    """CREATE TABLE IF NOT EXISTS transport_events (
        seen_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
        kind VARCHAR NOT NULL,
        host VARCHAR NOT NULL,
        subject VARCHAR NOT NULL,
        epoch BIGINT,
        seq BIGINT,
        count BIGINT NOT NULL,
        reason VARCHAR NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS summary_messages (
        msg_id VARCHAR PRIMARY KEY,
        subject VARCHAR NOT NULL,
        level VARCHAR NOT NULL,
        rack VARCHAR NOT NULL,
        job VARCHAR NOT NULL,
        time_ns BIGINT NOT NULL,
        sources BIGINT NOT NULL,
        overlapped BOOLEAN NOT NULL,
        received_at TIMESTAMP NOT NULL DEFAULT current_timestamp)""",
    """CREATE TABLE IF NOT EXISTS summary_sources (
        msg_id VARCHAR NOT NULL,
        level VARCHAR NOT NULL,
        job VARCHAR NOT NULL,
        time_ns BIGINT NOT NULL,
        host VARCHAR NOT NULL,
        epoch BIGINT NOT NULL,
        seq BIGINT NOT NULL)""",
    # The partials as the reducers sent them (sensor split like series).
    f"""CREATE TABLE IF NOT EXISTS summary_partials (
        msg_id VARCHAR NOT NULL,{_SUMMARY_MOMENTS})""",
    # Job-wide summaries stored merged, per (job, period, sensor): written by
    # collectors before version 3 (and synthetic stores); readers use the
    # view merged_summaries (summary_view.py), which prefers these rows.
    f"""CREATE TABLE IF NOT EXISTS job_summaries (
        job VARCHAR NOT NULL,
        time_ns BIGINT NOT NULL,{_SUMMARY_MOMENTS},
        origin VARCHAR NOT NULL,
        PRIMARY KEY (job, time_ns, measurement, tags, field))""",
    # Version 3: the collector appends only. Each summary message's rows as
    # sent, with its level and (job, period); rack partials merged when read.
    f"""CREATE TABLE IF NOT EXISTS summary_rows (
        msg_id VARCHAR NOT NULL,
        level VARCHAR NOT NULL,
        job VARCHAR NOT NULL,
        time_ns BIGINT NOT NULL,{_SUMMARY_ROW})""",
    # A (job, period) rebuilt from raw data (partials overlapped), a new set
    # of rows each time: the newest built_ns wins; a row without a sensor
    # (measurement NULL) marks a rebuild that found no raw data.
    f"""CREATE TABLE IF NOT EXISTS summary_rebuilt (
        job VARCHAR NOT NULL,
        time_ns BIGINT NOT NULL,
        built_ns BIGINT NOT NULL,
        measurement VARCHAR, tags VARCHAR, field VARCHAR,
        count BIGINT, sum DOUBLE, mean DOUBLE, m2 DOUBLE, min DOUBLE, max DOUBLE,
        {SKETCH_COLUMNS})""",
    # A message's source batches in its own row (summary_sources: before 3).
    f"ALTER TABLE summary_messages ADD COLUMN IF NOT EXISTS source_list {SOURCE_LIST}",
    # Schema 4: the sources as sorted 64-bit hashes in one BLOB
    # (transport/source_hashes.py); source_list stays for rows written before.
    "ALTER TABLE summary_messages ADD COLUMN IF NOT EXISTS source_hashes BLOB",
)

_VIEWS = (
    # A job's nodes and time span, from the agent's per-period job lines.
    """CREATE OR REPLACE VIEW jobs AS
        SELECT job, count(DISTINCT host) AS nodes, min(time_ns) AS start_ns,
               max(time_ns) AS end_ns, count(*) AS node_periods
        FROM job_activity GROUP BY job""",
    *SUMMARY_VIEWS,
)


def _schema_version(con: duckdb.DuckDBPyConnection, path: Path) -> int | None:
    tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    if "hushmon_schema" not in tables:
        if tables:
            raise HushmonError(f"{path} is a DuckDB database but not a hushmon store")
        return None
    rows = con.execute("SELECT max(version) FROM hushmon_schema").fetchall()
    row = rows[0] if rows else None
    return int(row[0]) if row and row[0] is not None else None


def _connect(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    try:
        con = duckdb.connect(str(path), read_only=read_only)
        # hushmon draws its own progress bars; DuckDB's would interleave.
        con.execute("SET enable_progress_bar = false").fetchall()
        # a long-running collector or server idles between its queries
        duckdb_heap.purge_freed_pages(con)
        return con
    except duckdb.IOException as exc:
        text = str(exc).splitlines()[0]
        if "lock" in text.lower():
            raise HushmonError(f"{path} is in use by another process ({text})") from exc
        raise HushmonError(f"cannot open store {path}: {text}") from exc
    except duckdb.Error as exc:
        raise HushmonError(f"cannot open store {path}: {str(exc).splitlines()[0]}") from exc


def _check_version(con: duckdb.DuckDBPyConnection, path: Path) -> int | None:
    version = _schema_version(con, path)
    if version is not None and version > SCHEMA_VERSION:
        con.close()
        raise HushmonError(
            f"{path} has store schema version {version}, newer than this hushmon's "
            f"({SCHEMA_VERSION}); upgrade hushmon to read it (the file was not changed)"
        )
    return version


def open_store(path: Path, create: bool = True) -> duckdb.DuckDBPyConnection:
    """Open (and if needed create) the store for writing: the embedded DuckDB
    file, or a lake (a ``*.lake`` folder, :mod:`hushmon.store.lake`)."""
    path = Path(path)
    if is_lake(path):
        return open_lake(path, create=create)
    if path.exists():
        # Check read-only first so a refused database is never touched.
        probe = _connect(path, read_only=True)
        _check_version(probe, path)
        probe.close()
    elif not create:
        raise HushmonError(f"store {path} does not exist: run 'hushmon ingest' first")
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    con = _connect(path, read_only=False)
    # A store made before job data was kept private (0644) is made so now.
    for made in (path, path.with_name(path.name + ".wal")):
        drop_world_access(made)
    version = _check_version(con, path)
    if version is None or version < SCHEMA_VERSION:
        # A new store gets every table; an older one the tables added since
        # its version (1 -> 2: the transport tables; 2 -> 3: summary_rows,
        # summary_rebuilt, summary_messages.source_list; 3 -> 4:
        # summary_messages.source_hashes). Every statement is
        # CREATE ... IF NOT EXISTS or ADD COLUMN IF NOT EXISTS, so the same
        # list migrates.
        in_transaction(con, _create_tables)
    for statement in _VIEWS:
        con.execute(statement).fetchall()
    # The views in the database file, not only in its WAL: DuckDB 1.5.5
    # cannot replay the summary views (subqueries, a lambda) from the WAL of
    # a process killed before its next checkpoint ("GetDefaultDatabase with
    # no default database set"), and the file would not open again.
    con.execute("CHECKPOINT").fetchall()
    return con


def open_store_readonly(path: Path) -> duckdb.DuckDBPyConnection:
    """Open an existing store for reading (digest, export); a lake may be
    written by its collectors meanwhile."""
    path = Path(path)
    if is_lake(path):
        return open_lake_readonly(path)
    if not path.exists():
        raise HushmonError(f"store {path} does not exist: run 'hushmon ingest' first")
    con = _connect(path, read_only=True)
    if _check_version(con, path) is None:
        con.close()
        raise HushmonError(f"{path} is empty, not a hushmon store: run 'hushmon ingest' first")
    return con


def _create_tables(con: duckdb.DuckDBPyConnection) -> None:
    for statement in _TABLES:
        con.execute(statement).fetchall()
    con.execute("INSERT INTO hushmon_schema (version) VALUES (?)", [SCHEMA_VERSION]).fetchall()
