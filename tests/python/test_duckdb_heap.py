"""DuckDB's own allocators as store/duckdb_heap.py reads them: a table that
DuckDB builds is counted there (and not by glibc), the pages it frees are
counted as kept until DuckDB's decay gives them back, and a lake
connection has them given back in the background."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import duckdb
import pytest

from hushmon.store import duckdb_heap
from hushmon.store.lake import open_lake
from hushmon.transport.memdump import malloc_mib


def test_a_duckdb_table_is_counted_by_duckdbs_allocator() -> None:
    before = duckdb_heap.stats_mib()
    if before is None:
        pytest.skip("this DuckDB library exports no duckdb_je_mallctl (not a Linux build)")
    glibc_before = malloc_mib()
    con = duckdb.connect()
    try:
        # the process-wide purge a lake connection of an earlier test started
        # would give the freed pages back before they are counted below
        con.execute("SET allocator_background_threads = false")
        # ~48 MB of BIGINTs, held by the connection
        con.execute("CREATE TABLE t AS SELECT range AS a, range * 2 AS b FROM range(3000000)")
        held = duckdb_heap.stats_mib()
        glibc_held = malloc_mib()
        con.execute("DROP TABLE t")
        freed = duckdb_heap.stats_mib()
    finally:
        con.close()
    assert held is not None and freed is not None
    assert held["allocated"] - before["allocated"] > 30, (before, held)
    assert held["resident"] >= held["allocated"]
    if glibc_before is not None and glibc_held is not None:
        # the table's bytes are not glibc's: that is why mallinfo2 missed them
        assert glibc_held["in_use"] - glibc_before["in_use"] < 10, (glibc_before, glibc_held)
    assert freed["allocated"] - before["allocated"] < 10, (before, freed)
    # freed, not yet given back: resident beyond what is allocated
    assert freed["dirty"] > 20, freed


def test_a_lake_connection_gives_duckdbs_freed_pages_back(tmp_path: Path) -> None:
    """open_lake has DuckDB's allocators give freed pages back: the
    library's within seconds, not when its arena next allocates (the
    collector idles between groups); each extension's own copy at once."""
    if duckdb_heap.stats_mib() is None:
        pytest.skip("this DuckDB library exports no duckdb_je_mallctl (not a Linux build)")
    con = open_lake(tmp_path / "t.lake")
    try:
        con.execute("CREATE TEMP TABLE t AS SELECT range AS a, range * 2 AS b FROM range(3000000)")
        con.execute("DROP TABLE t")
        freed = duckdb_heap.stats_mib()
        assert freed is not None
        deadline = time.monotonic() + 20
        now = freed
        while now is not None and now["dirty"] > 10 and time.monotonic() < deadline:
            time.sleep(0.2)
            now = duckdb_heap.stats_mib()
        assert now is not None and now["dirty"] <= 10, (freed, now)
        copies = duckdb_heap.copies_mib()
    finally:
        con.close()
    assert {"duckdb", "ducklake", "sqlite_scanner"} <= set(copies), copies
    if shutil.which("nm") is not None:
        for name in ("ducklake", "sqlite_scanner"):
            got = copies[name]
            assert got is not None and got["mapped"] > 0, copies
            # the extension's copy gives its freed pages back as it frees them
            assert got["dirty"] < 1, copies


def _leave_freed_pages(con: duckdb.DuckDBPyConnection) -> dict[str, float] | None:
    """~48 MB that DuckDB's library allocator freed and keeps (no purge by
    decay: the background thread off); its totals then."""
    con.execute("SET allocator_background_threads = false")
    con.execute("CREATE TABLE t AS SELECT range AS a, range * 2 AS b FROM range(3000000)")
    con.execute("DROP TABLE t")
    return duckdb_heap.stats_mib()


def test_a_closed_database_leaves_the_background_purge_on_after_close() -> None:
    """Closing any DuckDB database switches the library's background purge
    thread off for every database of the process; after_close switches it
    on again and gives the freed pages back at once (the collector's
    reopen every 256 transactions closes one)."""
    if duckdb_heap.background_thread_on() is None:
        pytest.skip("this DuckDB library exports no duckdb_je_mallctl (not a Linux build)")
    keep = duckdb.connect()
    try:
        duckdb_heap.purge_freed_pages(keep)
        assert duckdb_heap.background_thread_on() is True
        duckdb.connect().close()
        # DuckDB's behaviour that after_close answers: if this ever reads
        # True, DuckDB changed and after_close may no longer be needed
        assert duckdb_heap.background_thread_on() is False
        kept = _leave_freed_pages(keep)
        assert duckdb_heap.after_close() is True
        given_back = duckdb_heap.stats_mib()
        assert duckdb_heap.background_thread_on() is True
    finally:
        keep.close()
        duckdb_heap.after_close()
    assert kept is not None and given_back is not None
    assert kept["dirty"] > 20, kept
    assert given_back["dirty"] < 5, (kept, given_back)


def test_every_copy_purged_gives_its_freed_pages_back() -> None:
    if duckdb_heap.stats_mib() is None:
        pytest.skip("this DuckDB library exports no duckdb_je_mallctl (not a Linux build)")
    con = duckdb.connect()
    try:
        kept = _leave_freed_pages(con)
        by_arena = duckdb_heap.arenas_of("duckdb")
        purged = duckdb_heap.purge_every_copy()
        given_back = duckdb_heap.stats_mib()
    finally:
        con.close()
        duckdb_heap.after_close()
    assert "duckdb" in purged, purged
    # the arena that keeps them, with the decay that should give them back
    assert by_arena is not None and sum(mib for _, mib, _ in by_arena) > 20, by_arena
    assert all(ms is not None and ms >= 0 for _, _, ms in by_arena), by_arena
    assert kept is not None and given_back is not None
    assert kept["dirty"] > 20, kept
    assert given_back["dirty"] < 5, (kept, given_back)
