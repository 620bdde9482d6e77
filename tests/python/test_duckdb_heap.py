"""DuckDB's own allocators as store/duckdb_heap.py reads them: a table that
DuckDB builds is counted there (and not by glibc), the pages it frees are
counted as kept until DuckDB's decay gives them back, and a lake
connection has them given back as they are freed."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from hushmon.store import duckdb_heap
from hushmon.store.lake import open_lake
from hushmon.transport.memdump import malloc_mib


@pytest.fixture
def decay_10s() -> Iterator[None]:
    """The library's jemalloc keeps freed pages for 10 s, whatever an earlier
    test's lake connection set in this process (the decay is process-wide:
    with 0, nothing freed would be kept to count); its decay restored after."""
    before = duckdb_heap.decay_ms()
    if before is None:
        pytest.skip("this DuckDB library exports no duckdb_je_mallctl (not a Linux build)")
    assert duckdb_heap.set_decay_ms(10_000)
    yield
    duckdb_heap.set_decay_ms(before)


def test_a_duckdb_table_is_counted_by_duckdbs_allocator(decay_10s: None) -> None:
    before = duckdb_heap.stats_mib()
    assert before is not None
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
    """open_lake has DuckDB's allocators give pages back as they are freed,
    the library's (decay 0, set at run time in every arena) and each
    extension's own copy (by its start-up variable): the collector's
    transactions free tens of MiB each, and it idles between them."""
    if duckdb_heap.stats_mib() is None:
        pytest.skip("this DuckDB library exports no duckdb_je_mallctl (not a Linux build)")
    if os.environ.get(duckdb_heap.CONF_ENV, duckdb_heap.PURGE_CONF) != duckdb_heap.PURGE_CONF:
        pytest.skip(f"{duckdb_heap.CONF_ENV} is set here: the site's decay stands")
    con = open_lake(tmp_path / "t.lake")
    try:
        assert duckdb_heap.decay_ms() == 0
        con.execute("CREATE TEMP TABLE t AS SELECT range AS a, range * 2 AS b FROM range(3000000)")
        held = duckdb_heap.stats_mib()
        con.execute("DROP TABLE t")
        freed = duckdb_heap.stats_mib()
        by_arena = duckdb_heap.arenas_of("duckdb")
        copies = duckdb_heap.copies_mib()
    finally:
        con.close()
        duckdb_heap.after_close()
    assert held is not None and freed is not None
    assert held["allocated"] - freed["allocated"] > 30, (held, freed)
    # given back as freed, not kept for a decay to run
    assert freed["dirty"] < 5, (held, freed)
    assert by_arena is not None and all(ms == 0 for _, _, ms in by_arena), by_arena
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


def test_a_closed_database_leaves_the_background_purge_on_after_close(decay_10s: None) -> None:
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
        duckdb_heap.set_decay_ms(10_000)  # freed pages kept, to be counted
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


def test_every_copy_purged_gives_its_freed_pages_back(decay_10s: None) -> None:
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
