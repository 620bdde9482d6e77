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

import importlib.util
from pathlib import Path

import duckdb

from hushmon.datadir import drop_world_access
from hushmon.errors import HushmonError

LAKE_SCHEMA_VERSION = 1
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
)

_VIEWS = (
    """CREATE OR REPLACE VIEW series AS
        SELECT DISTINCT ON (series_id) series_id, host, measurement, tags, field
        FROM series_rows""",
    """CREATE OR REPLACE VIEW jobs AS
        SELECT job, count(DISTINCT host) AS nodes, min(time_ns) AS start_ns,
               max(time_ns) AS end_ns, count(*) AS node_periods
        FROM job_activity GROUP BY job""",
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


def _attach(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false").fetchall()
    load_extensions(con)
    catalog = path / CATALOG_NAME
    options = [f"DATA_PATH '{path / DATA_NAME}/'"]
    if read_only:
        options.append("READ_ONLY")
    quoted = str(catalog).replace("'", "''")
    try:
        con.execute(
            f"ATTACH 'ducklake:sqlite:{quoted}' AS {LAKE_ALIAS} ({', '.join(options)})"
        ).fetchall()
        con.execute(f"USE {LAKE_ALIAS}").fetchall()
    except duckdb.Error as exc:
        con.close()
        raise HushmonError(f"cannot open lake {path}: {str(exc).splitlines()[0]}") from exc
    return con


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
    con = _attach(path, read_only=False)
    drop_world_access(path / CATALOG_NAME)
    version = _check_version(con, path)
    if version is None:
        con.execute("BEGIN TRANSACTION").fetchall()
        for statement in _TABLES:
            con.execute(statement).fetchall()
        con.execute(
            "INSERT INTO hushmon_schema VALUES (?, current_timestamp)", [LAKE_SCHEMA_VERSION]
        ).fetchall()
        for statement in _VIEWS:
            con.execute(statement).fetchall()
        con.execute("COMMIT").fetchall()
    return con


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
